"""Our producer and push consumer against the Apache C++ client, through our broker.

Our producer sends and the C++ push consumer receives every message (body, keys, tags, user
properties, message id, a zlib-compressed body); the C++ producer sends and our push consumer
receives them the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from tests.broker.conftest import broker_configs
from tests.compat.test_cpp_broker import run_driver
from tests.compat.test_cpp_namesrv import pytestmark as cpp_available
from tests.conftest import namesrv_config

pytestmark = cpp_available
TOPIC = "InteropTopic"
COUNT = 10
LARGE = 6000  # over compressMsgBodyOverHowmuch: travels zlib-compressed


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[str, BrokerController]]:
    ns = NamesrvController(namesrv_config(tmp_path))
    await ns.start()
    config, store = broker_configs(tmp_path, f"127.0.0.1:{ns.port}")
    broker = BrokerController(config, store)
    await broker.start()
    broker.state.topics.put(TopicConfig(TOPIC, 4, 4))
    await broker.registration.register_all()
    try:
        yield f"127.0.0.1:{ns.port}", broker
    finally:
        await broker.stop()
        await ns.stop()


def body_of(i: int) -> str:
    return f"py-{i}" if i else "py-0:".ljust(LARGE, "z")


async def test_cpp_push_consumer_receives_what_our_producer_sends(
        cluster: tuple[str, BrokerController], tmp_path: Path) -> None:
    namesrv, _ = cluster
    producer = Producer("InteropPG", ClientConfig(namesrv_addr=namesrv))
    await producer.start()
    try:
        ids = {}
        for i in range(COUNT):
            result = await producer.send(Message(
                TOPIC, body_of(i).encode(), tags=f"Tag{i % 2}", keys=f"key-{i}",
                properties={"seq": str(i), "origin": "python"}))
            ids[body_of(i)] = result.msg_id
    finally:
        await producer.shutdown()
    lines = await run_driver(tmp_path, "push-props", namesrv, TOPIC, "CppInteropCG", str(COUNT),
                             "seq,origin,UNIQ_KEY")
    got = {r["received"]["body"]: r["received"] for r in lines  # type: ignore[index]
           if isinstance(r.get("received"), dict)}
    assert set(got) == {body_of(i) for i in range(COUNT)}
    for i in range(COUNT):
        record = got[body_of(i)]
        assert record["tags"] == f"Tag{i % 2}" and record["keys"] == f"key-{i}"
        assert record["topic"] == TOPIC and record["seq"] == str(i)
        assert record["properties"] == {"seq": str(i), "origin": "python",
                                        "UNIQ_KEY": ids[body_of(i)]}
        assert record["msgId"] == ids[body_of(i)]


async def test_our_push_consumer_receives_what_the_cpp_producer_sends(
        cluster: tuple[str, BrokerController], tmp_path: Path) -> None:
    namesrv, _ = cluster
    sent = await run_driver(tmp_path, "produce", namesrv, TOPIC, str(COUNT), "sync")
    large = await run_driver(tmp_path, "produce-large", namesrv, TOPIC, "2", str(LARGE))
    cpp_ids = {r["msgId"] for r in sent + large if "msgId" in r}
    consumer = PushConsumer("PyInteropCG", ClientConfig(namesrv_addr=namesrv))
    received: list[MessageExt] = []
    all_in = asyncio.Event()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        if len(received) >= COUNT + 2:
            all_in.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe(TOPIC, "Tag0 || Tag1")
    consumer.register_concurrently(listener)
    await consumer.start()
    try:
        await asyncio.wait_for(all_in.wait(), 30)
    finally:
        await consumer.shutdown()
    by_body = {m.body.decode(): m for m in received}
    for i in range(COUNT):
        m = by_body[f"cpp-sync-{i}"]
        assert m.topic == TOPIC and m.tags == f"Tag{i % 2}" and m.keys == (f"key-{i}",)
        assert m.user_properties() == {"seq": str(i)}
    for i in range(2):
        m = by_body[f"cpp-large-{i}:".ljust(LARGE, "x")]
        assert m.sysflag & 0x1  # the C++ producer compressed it; we inflated it
        assert m.properties["seq"] == str(i)
    assert {m.msg_id for m in received} == cpp_ids
