"""The push consumer against our broker: clustering, broadcasting, where to start, offsets."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere, MessageModel
from engine.protocol.body.message_queue import MessageQueue
from tests.clock import ManualClock

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "PushTopic"
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def push(group: str, config: ClientConfig, track: Callable[[Any], Any], *,
         options: ConsumerOptions | None = None, expression: str = "*",
         instance: str | None = None, shared: Inbox | None = None
         ) -> tuple[PushConsumer, Inbox]:
    if instance is not None:
        config = dataclasses.replace(config, instance_name=instance)
    consumer: PushConsumer = track(PushConsumer(group, config, options=options))
    inbox = Inbox()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        inbox.add(msgs)
        if shared is not None:
            shared.add(msgs)
        return OK

    consumer.subscribe(TOPIC, expression)
    consumer.register_concurrently(listener)
    return consumer, inbox


async def send(producer: Producer, *bodies: str, tags: str = "TagA") -> None:
    for body in bodies:
        await producer.send(Message(TOPIC, body.encode(), tags=tags))


def topic_queues(queues: set[MessageQueue]) -> set[int]:
    return {mq.queue_id for mq in queues if mq.topic == TOPIC}


@pytest.fixture
async def producer(client_config: ClientConfig, track: Callable[[Any], Any]) -> Producer:
    p: Producer = track(Producer("PushPG", client_config))
    await p.start()
    return p


async def test_two_consumers_split_the_queues_and_one_takes_all_when_the_other_leaves(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    both = Inbox()
    first, inbox1 = push("SplitCG", client_config, track, shared=both)
    await first.start()
    await first.wait_for_assignment(lambda qs: topic_queues(qs) == {0, 1, 2, 3})
    second, inbox2 = push("SplitCG", client_config, track, shared=both)
    await second.start()  # its heartbeat makes the broker notify the first: both rebalance
    mine1 = topic_queues(await first.wait_for_assignment(lambda qs: len(topic_queues(qs)) == 2))
    mine2 = topic_queues(await second.wait_for_assignment(lambda qs: len(topic_queues(qs)) == 2))
    assert mine1 | mine2 == {0, 1, 2, 3} and not mine1 & mine2
    # one of them also holds the single %RETRY%SplitCG queue
    assert len([mq for c in (first, second) for mq in c.assignment()
                if mq.topic == "%RETRY%SplitCG"]) == 1
    await send(producer, *(f"m{i}" for i in range(16)))
    await both.wait_for(16)
    assert sorted(both.bodies()) == sorted(f"m{i}" for i in range(16))
    assert inbox1.messages and inbox2.messages
    assert {m.queue_id for m in inbox1.messages} <= mine1
    assert {m.queue_id for m in inbox2.messages} <= mine2
    await second.shutdown()  # UNREGISTER_CLIENT: the broker tells the first to rebalance
    await first.wait_for_assignment(lambda qs: topic_queues(qs) == {0, 1, 2, 3})
    before = len(inbox1.messages)
    await send(producer, *(f"late{i}" for i in range(8)))
    await inbox1.wait_for(before + 8)
    assert {f"late{i}" for i in range(8)} <= set(inbox1.bodies())


async def test_tags_are_filtered_by_the_broker_and_rechecked(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    consumer, inbox = push("TagCG", client_config, track, expression="TagA || TagC")
    await consumer.start()
    for tag in ("TagA", "TagB", "TagC", "TagAB", "TagA"):
        await send(producer, f"body-{tag}", tags=tag)
    await inbox.wait_for(3)
    await send(producer, "marker", tags="TagC")
    await inbox.wait_for(4)
    assert [m.tags for m in inbox.messages] == ["TagA", "TagC", "TagA", "TagC"]


async def test_committed_offsets_are_resumed_by_the_next_consumer(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=2)
    await send(producer, *(f"old{i}" for i in range(6)))
    first, inbox = push("ResumeCG", client_config, track)
    await first.start()
    await inbox.wait_for(6)
    await first.shutdown()  # commits what it consumed, answered
    committed = sum(broker.state.offsets.query("ResumeCG", TOPIC, q) for q in range(2))
    assert committed == 6
    await send(producer, "new0", "new1")
    second, again = push("ResumeCG", client_config, track)
    await second.start()
    await again.wait_for(2)
    assert sorted(again.bodies()) == ["new0", "new1"]


async def test_offsets_are_committed_while_consuming(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    consumer, inbox = push("CommitCG", client_config, track)
    await consumer.start()
    await send(producer, "a", "b", "c")
    await inbox.wait_for(3)
    mq = MessageQueue(TOPIC, "broker-a", 0)
    assert consumer.offset_store.table[mq] == 3
    await consumer.instance.persist_all_offsets()  # what the 5 s timer does (oneway)
    await send(producer, "d")  # a later request on the same connection: the commit is in
    await inbox.wait_for(4)
    assert broker.state.offsets.query("CommitCG", TOPIC, 0) >= 3


@pytest.mark.parametrize("where, expected", [
    (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ["old0", "old1", "old2", "new0"]),
    (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, ["new0"]),
])
async def test_consume_from_first_or_last_offset(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer, where: ConsumeFromWhere,
        expected: list[str]) -> None:
    # ratio 0: every stored message counts as "on disk", so the broker answers
    # QUERY_NOT_FOUND for a new group instead of offset 0 (request-codes.md §3.6)
    broker = await start_broker(access_message_in_memory_max_ratio=0)
    await make_topic(broker, TOPIC, queues=1)
    await send(producer, "old0", "old1", "old2")
    consumer, inbox = push("WhereCG", client_config, track,
                           options=ConsumerOptions(consume_from_where=where))
    await consumer.start()
    await consumer.wait_for_assignment(lambda qs: topic_queues(qs) == {0})
    await send(producer, "new0")
    await inbox.wait_for(len(expected))
    assert inbox.bodies() == expected


async def test_young_queues_start_at_zero_for_a_new_group(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    await send(producer, "old0", "old1")
    consumer, inbox = push("YoungCG", client_config, track)  # CONSUME_FROM_LAST_OFFSET
    await consumer.start()
    await inbox.wait_for(2)
    assert inbox.bodies() == ["old0", "old1"]


async def test_consume_from_timestamp(start_broker: BrokerFactory,
                                      client_config: ClientConfig,
                                      track: Callable[[Any], Any], producer: Producer) -> None:
    clock = ManualClock()
    broker = await start_broker(clock=clock, access_message_in_memory_max_ratio=0)
    await make_topic(broker, TOPIC, queues=1)
    await send(producer, "before0", "before1")
    clock.advance(120_000)
    await send(producer, "after0", "after1")
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime((clock.now - 60_000) / 1000))
    consumer, inbox = push("StampCG", client_config, track, options=ConsumerOptions(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, consume_timestamp=stamp))
    await consumer.start()
    await inbox.wait_for(2)
    assert inbox.bodies() == ["after0", "after1"]


async def test_broadcasting_consumers_each_get_everything_and_keep_offsets_locally(
        start_broker: BrokerFactory, client_config: ClientConfig, tmp_path: Path,
        track: Callable[[Any], Any], producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=2)
    await send(producer, *(f"m{i}" for i in range(4)))
    options = ConsumerOptions(message_model=MessageModel.BROADCASTING,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              local_offset_store_dir=str(tmp_path / "offsets"))
    one, inbox1 = push("CastCG", client_config, track, options=options, instance="one")
    two, inbox2 = push("CastCG", client_config, track, options=options, instance="two")
    await one.start()
    await two.start()
    assert one.instance.client_id == "127.0.0.1@one"  # broadcasting keeps its instance name
    await inbox1.wait_for(4)
    await inbox2.wait_for(4)
    assert sorted(inbox1.bodies()) == sorted(inbox2.bodies()) == [f"m{i}" for i in range(4)]
    await one.shutdown()
    path = tmp_path / "offsets" / "127.0.0.1@one" / "CastCG" / "offsets.json"
    assert '"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"PushTopic"}:' in (
        path.read_text())
    assert broker.state.offsets.query("CastCG", TOPIC, 0) < 0  # nothing went to the broker
    await send(producer, "m4", "m5")
    await inbox2.wait_for(6)
    again, inbox3 = push("CastCG", client_config, track, options=options, instance="one")
    await again.start()
    await inbox3.wait_for(2)
    assert sorted(inbox3.bodies()) == ["m4", "m5"]
