"""Cluster mode: one proxy in front of two brokers, reached over the name server's routes."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.proxy.server import ProxyServer
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.proxy.conftest import TEST_PROXY, in_thread
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)


async def test_one_proxy_fronts_every_broker_of_the_routes(tmp_path: Path,
                                                           namesrv: NamesrvController) -> None:
    async with contextlib.AsyncExitStack() as stack:
        brokers = [await stack.enter_async_context(running_broker(
            tmp_path / name, namesrv, name=name)) for name in ("broker-a", "broker-b")]
        client = RemotingClient()
        stack.push_async_callback(client.close)
        for broker in brokers:
            await BrokerAdmin(client).create_topic(broker.addr, TopicConfig("Spread", 2, 2))
        proxy = ProxyServer(TEST_PROXY, f"127.0.0.1:{namesrv.port}", host="127.0.0.1")
        await proxy.start()
        stack.push_async_callback(proxy.stop, 0)
        for _ in range(100):  # both brokers' registrations of the topic reach the name server
            proxy.gateway.forget_route("Spread")
            if len((await proxy.gateway.route("Spread")).broker_datas) == 2:
                break
            await asyncio.sleep(0.05)
        config = ClientConfiguration(proxy.endpoint, Credentials())
        producer = Producer(config, ("Spread",))
        await in_thread(producer.startup)
        consumer = SimpleConsumer(config, "SpreadGroup", {"Spread": FilterExpression("*")})
        await in_thread(consumer.startup)
        try:
            for i in range(8):
                msg = Message()
                msg.topic, msg.body = "Spread", str(i).encode()
                await in_thread(producer.send, msg)
            admin = BrokerAdmin(client)
            stored = []
            for broker in brokers:
                stats = await admin.topic_stats(broker.addr, "Spread")
                stored.append(sum(o.max_offset for o in stats.offset_table.values()))
                conns = await admin.consumer_connections(broker.addr, "SpreadGroup")
                assert {c.client_id for c in conns.connection_set} == {consumer.client_id}
            # Round robin over the four queues puts four on each broker, unless a send that
            # timed out on a loaded machine was retried on the next queue.
            assert sum(stored) == 8 and min(stored) >= 1, stored
        finally:
            await in_thread(consumer.shutdown)
            await in_thread(producer.shutdown)
