"""A 5.x POP group on our broker (gRPC proxy, the official Python client): the console finds it
from the brokers, not from a ``%RETRY%<group>`` route (Apache 5.3 gives a POP group none), and
its POP retry topic belongs to it (tests/mqadmin/test_apache5_console.py: the same on 5.3.3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.client.admin.cluster import MQAdmin
from engine.namesrv.controller import NamesrvController
from engine.proxy.config import ProxyConfig
from tests.conftest import addr_of
from tests.mqadmin.cli import invoke, json_rows
from tests.proxy.conftest import Stack, in_thread, running_stack
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

pytestmark = pytest.mark.timeout(180)

GROUP = "PopGroup"
TOPIC = "PopT"
#: Short long polls and invisible times, so a message not acked comes back within about a
#: second: its revival into the POP retry topic does not wake a held receive (as on 5.3.3),
#: so the receive that gets it back returns only at the end of its poll.
PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1,
                    grpc_client_consumer_max_long_polling_timeout_millis=500,
                    min_invisible_time_mills_for_recv=1000)


@pytest.fixture
async def stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, PROXY) as s:
        await s.create_topic(TOPIC)
        yield s


async def _send(stack: Stack, *bodies: bytes) -> None:
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials()), (TOPIC,))
    await in_thread(producer.startup)
    try:
        for body in bodies:
            msg = Message()
            msg.topic, msg.body = TOPIC, body
            await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)


async def _receive(consumer: SimpleConsumer, count: int, invisible_s: int) -> list[Message]:
    got: list[Message] = []
    for _ in range(30):
        got += await in_thread(consumer.receive, 16, invisible_s) or []
        if len(got) >= count:
            return got
    raise AssertionError(f"received {len(got)} of {count}")


async def _topics(ns: str) -> set[str]:
    async with MQAdmin(ns) as admin:
        return set((await admin.namesrv.all_topics()).topic_list)


async def _drop_group_retry_topic(stack: Stack, ns: str) -> None:
    """Leave the group as Apache 5.3 has a POP group: without ``%RETRY%<group>``."""
    topic = f"%RETRY%{GROUP}"
    async with MQAdmin(ns) as admin:
        await admin.delete_topic(topic)
    assert topic not in await _topics(ns)


async def test_a_pop_group_is_found_from_the_brokers(stack: Stack,
                                                     namesrv: NamesrvController) -> None:
    ns = addr_of(namesrv)
    await _send(stack, b"a", b"b", b"c")
    consumer = SimpleConsumer(ClientConfiguration(stack.endpoint, Credentials()), GROUP,
                              {TOPIC: FilterExpression("*")}, await_duration=1)
    await in_thread(consumer.startup)
    try:
        first = await _receive(consumer, 3, invisible_s=1)  # none acked: all come back
        again = await _receive(consumer, 3, invisible_s=60)
        assert sorted(m.body for m in again) == sorted(m.body for m in first)
        for m in again[:2]:
            await in_thread(consumer.ack, m)  # one stays in flight
        pop_retry = f"%RETRY%{GROUP}_{TOPIC}"
        for _ in range(100):
            if pop_retry in await _topics(ns):
                break
            await asyncio.sleep(0.1)
        assert pop_retry in await _topics(ns)
        await _drop_group_retry_topic(stack, ns)

        (conn,) = await in_thread(json_rows, "consumerConnection", "-n", ns, "-g", GROUP)
        assert (conn["clientId"], conn["language"], conn["protocol"]) == (
            consumer.client_id, "PYTHON", "gRPC")
        assert conn["subscriptions"] == f"{TOPIC}:*"

        listed = await in_thread(json_rows, "consumerProgress", "-n", ns)
        names = {r["group"] for r in listed}
        assert GROUP in names and f"{GROUP}_{TOPIC}" not in names
        (row,) = [r for r in listed if r["group"] == GROUP]
        assert row["count"] == 1

        progress = await in_thread(json_rows, "consumerProgress", "-n", ns, "-g", GROUP)
        total = progress[-1]
        assert {r["topic"] for r in progress[:-1]} >= {TOPIC}
        assert total["topic"] == "(total)"
        only = await in_thread(json_rows, "consumerProgress", "-n", ns, "-g", GROUP,
                               "-t", TOPIC)
        assert {r["topic"] for r in only[:-1]} == {TOPIC}
        queues = [r for r in only[:-1] if r["brokerOffset"]]
        assert sum(r["brokerOffset"] for r in queues) == 3

        (status,) = await in_thread(json_rows, "consumerStatus", "-n", ns, "-g", GROUP)
        assert status["clientId"] == consumer.client_id and status["error"] is None
        assert status["subscriptions"] == f"{TOPIC}:*"

        lag = await in_thread(json_rows, "lag", "status", "-n", ns, "-g", GROUP)
        assert [r["group"] for r in lag] == [GROUP]

        missing = await in_thread(invoke, "consumerConnection", "-n", ns, "-g", "NoSuchGroup")
        assert missing.exit_code == 3 and "does not exist on any broker" in missing.stderr
    finally:
        await in_thread(consumer.shutdown)
