"""A RocketMQ 5 client through the gRPC proxy (cluster mode) under a controller-mode failover:
the proxy reads the new master from the route, and every acknowledged send is on it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.controller.manager import ControllerManager
from engine.namesrv.controller import NamesrvController
from engine.proxy.server import ProxyServer
from engine.remoting.client import RemotingClient
from tests.controller.test_failover import (
    QUEUES,
    TOPIC,
    bodies_on,
    master_of,
    three_brokers,
    until,
)
from tests.ha.procs import BrokerProcess
from tests.ha.traffic import create_topic, wait_topic_on
from tests.proxy.conftest import TEST_PROXY, in_thread
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer

#: Seconds the sends may take to reach the new master after the old one is killed.
RECOVERY_S = 60


async def test_5x_client_through_the_proxy_sends_on_after_the_master_is_killed(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    by_id = await three_brokers(tmp_path, ns, controller, brokers)
    client = RemotingClient()
    proxy = ProxyServer(TEST_PROXY, ns, host="127.0.0.1")
    await proxy.start()
    producer = Producer(ClientConfiguration(proxy.endpoint, Credentials()), (TOPIC,))
    try:
        await create_topic(client, ns, by_id[1].addr, TOPIC, QUEUES)
        for broker in (by_id[2], by_id[3]):
            await wait_topic_on(client, broker.addr, TOPIC)
        await in_thread(producer.startup)
        acked: set[bytes] = set()
        failed = 0

        async def send(i: int) -> None:
            nonlocal failed
            msg = Message()
            msg.topic, msg.body = TOPIC, b"v5-%d" % i
            try:
                await in_thread(producer.send, msg)
            except Exception:  # the client's own error types: counted, not acknowledged
                failed += 1
                return
            acked.add(msg.body)

        for i in range(30):
            await send(i)
        assert len(acked) == 30
        by_id[1].kill()
        await until(lambda: master_of(controller)[0] not in (None, 1), 30)
        new_id = master_of(controller)[0]
        assert new_id is not None
        i = 30
        # The client retries and the proxy re-reads the route: sends fail, fast, until it
        # names the new master.  Bounded by time, not by tries (a fast failure is no bound).
        try:
            async with asyncio.timeout(RECOVERY_S):
                while len(acked) < 60:
                    await send(i)
                    i += 1
        except TimeoutError:
            raise AssertionError(f"only {len(acked)} acknowledged, {failed} failed in "
                                 f"{RECOVERY_S} s") from None
        assert acked <= await bodies_on(client, ns, by_id[new_id].addr)
    finally:
        await in_thread(producer.shutdown)
        await proxy.stop(0)
        await client.close()
