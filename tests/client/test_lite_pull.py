"""The lite pull consumer: subscribe with rebalance or assign queues, poll, commit, seek."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.consume.consumer_options import LitePullOptions
from engine.client.consume.lite_pull_consumer import LitePullConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientStateError
from engine.client.core.message import Message, MessageExt
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.message_queue import MessageQueue

from .conftest import BrokerFactory, make_topic

TOPIC = "LiteTopic"
FIRST = LitePullOptions(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> BrokerController:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    return broker


@pytest.fixture
async def producer(broker: BrokerController, client_config: ClientConfig,
                   track: Callable[[Any], Any]) -> Producer:
    p: Producer = track(Producer("LitePG", client_config))
    await p.start()
    for i in range(12):
        await p.send(Message(TOPIC, f"m{i}".encode(), tags="T"))
    return p


async def poll_n(consumer: LitePullConsumer, n: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    while len(got) < n:
        batch = await consumer.poll(5000)
        assert batch, f"poll timed out after {len(got)} of {n} messages"
        got.extend(batch)
    return got


async def test_subscribe_poll_and_commit(broker: BrokerController, producer: Producer,
                                         client_config: ClientConfig,
                                         track: Callable[[Any], Any]) -> None:
    consumer: LitePullConsumer = track(LitePullConsumer("LiteCG", client_config,
                                                        options=FIRST))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    got = await poll_n(consumer, 12)
    assert sorted(m.body.decode() for m in got) == sorted(f"m{i}" for i in range(12))
    assert await consumer.poll(50) == []
    await consumer.commit_sync()
    per_queue = {q: broker.state.offsets.query("LiteCG", TOPIC, q) for q in range(4)}
    assert sum(per_queue.values()) == 12
    mq = MessageQueue(TOPIC, "broker-a", 0)
    assert await consumer.committed(mq) == per_queue[0]


async def test_assigned_queues_only_and_seek(broker: BrokerController, producer: Producer,
                                             client_config: ClientConfig,
                                             track: Callable[[Any], Any]) -> None:
    consumer: LitePullConsumer = track(LitePullConsumer("AssignCG", client_config,
                                                        options=FIRST))
    mine = {MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)}
    with pytest.raises(ClientStateError):
        await consumer.fetch_message_queues(TOPIC)
    await consumer.start()
    assert len(await consumer.fetch_message_queues(TOPIC)) == 4
    await consumer.assign(mine)
    got = await poll_n(consumer, 6)  # 12 messages round-robin over 4 queues
    assert {m.message_queue for m in got} == mine
    assert await consumer.poll(50) == []
    q0 = MessageQueue(TOPIC, "broker-a", 0)
    await consumer.seek(q0, 1)
    again = await poll_n(consumer, 2)
    assert [m.queue_offset for m in again] == [1, 2] and {m.message_queue for m in again} == {q0}
    await consumer.seek_to_begin(q0)
    assert [m.queue_offset for m in await poll_n(consumer, 3)] == [0, 1, 2]
    await consumer.seek_to_end(q0)
    assert await consumer.poll(50) == []
    with pytest.raises(ClientStateError, match="illegal"):
        await consumer.seek(q0, 99)
    with pytest.raises(ClientStateError, match="not assigned"):
        await consumer.seek(MessageQueue(TOPIC, "broker-a", 3), 0)


async def test_auto_commit_and_resume(broker: BrokerController, producer: Producer,
                                      client_config: ClientConfig,
                                      track: Callable[[Any], Any]) -> None:
    options = LitePullOptions(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              auto_commit_interval_millis=0)
    first: LitePullConsumer = track(LitePullConsumer("AutoCG", client_config, options=options))
    first.subscribe(TOPIC, "*")
    await first.start()
    await poll_n(first, 12)
    await first.poll(10)  # the next poll copies what was polled into the offset store
    assert sum(first.offset_store.table.values()) == 12
    await first.instance.persist_all_offsets()  # what the instance's 5 s timer sends
    mq = MessageQueue(TOPIC, "broker-a", 2)
    assert await first.committed(mq) == 3  # answered after the oneway commit on that link
    await first.shutdown()
    await producer.send(Message(TOPIC, b"fresh"))
    second: LitePullConsumer = track(LitePullConsumer("AutoCG", client_config,
                                                      options=options))
    second.subscribe(TOPIC, "*")
    await second.start()
    assert [m.body for m in await poll_n(second, 1)] == [b"fresh"]


async def test_compressed_bodies_arrive_inflated(broker: BrokerController, producer: Producer,
                                                 client_config: ClientConfig,
                                                 track: Callable[[Any], Any]) -> None:
    body = bytes(range(256)) * 64  # 16 KiB: sent zlib-compressed
    sent = await producer.send(Message(TOPIC, body, tags="Big"))
    consumer: LitePullConsumer = track(LitePullConsumer("BigCG", client_config))
    await consumer.start()
    await consumer.assign([sent.message_queue])
    await consumer.seek(sent.message_queue, sent.queue_offset)
    (got,) = await poll_n(consumer, 1)
    assert got.body == body and got.sysflag & 0x301 == 0x301 and got.msg_id == sent.msg_id
