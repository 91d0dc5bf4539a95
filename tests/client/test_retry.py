"""Failed messages come back: send-back to %RETRY%, the resend fallback, DLQ, orderly retries.

The broker's delay levels are shortened to 1 s ("1s 1s 1s 1s": level 3, the first retry,
waits 1 s), so a retry round takes about a second of real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import UnreachableError
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.client.produce.producer import Producer, select_by_hash
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.message import decode_record
from engine.remoting.errors import RemotingClosedError

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "RetryTopic"
LEVELS = "1s 1s 1s 1s"
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> BrokerController:
    broker = await start_broker(message_delay_level=LEVELS)
    await make_topic(broker, TOPIC, queues=2)
    return broker


@pytest.fixture
async def producer(broker: BrokerController, client_config: ClientConfig,
                   track: Callable[[Any], Any]) -> Producer:
    p: Producer = track(Producer("RetryPG", client_config))
    await p.start()
    return p


def failing_once(inbox: Inbox, failures: list[MessageExt], *, raise_instead: bool = False
                 ) -> Callable[[list[MessageExt], ConsumeConcurrentlyContext],
                               ConsumeConcurrentlyStatus]:
    """A listener that fails each message's first delivery."""
    failed: set[str] = set()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        fresh = [m for m in msgs if m.msg_id not in failed]
        if fresh:
            failed.update(m.msg_id for m in fresh)
            failures.extend(fresh)
            if raise_instead:
                raise RuntimeError("first delivery fails on purpose")
            return LATER
        inbox.add(msgs)
        return OK

    return listener


async def test_failed_messages_come_back_through_the_retry_topic(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        track: Callable[[Any], Any]) -> None:
    consumer = track(PushConsumer("RetryCG", client_config))
    consumer.subscribe(TOPIC, "*")
    inbox, failures = Inbox(), []
    consumer.register_concurrently(failing_once(inbox, failures, raise_instead=True))
    await consumer.start()
    sent = [await producer.send(Message(TOPIC, f"m{i}".encode(), tags="T", keys=f"k{i}",
                                        properties={"seq": str(i)})) for i in range(3)]
    await inbox.wait_for(3)
    by_id = {m.msg_id: m for m in inbox.messages}
    assert set(by_id) == {r.msg_id for r in sent}
    for i, result in enumerate(sent):
        again = by_id[result.msg_id]
        assert again.topic == TOPIC and again.queue_topic == "%RETRY%RetryCG"
        assert again.reconsume_times == 1 and again.body == f"m{i}".encode()
        assert again.tags == "T" and again.keys == (f"k{i}",)
        assert again.user_properties() == {"seq": str(i)}
        assert again.properties["RETRY_TOPIC"] == TOPIC
    assert all(f.reconsume_times == 0 and f.topic == TOPIC for f in failures)
    assert broker.state.store.get_max_offset_in_queue("%RETRY%RetryCG", 0) == 3


async def test_when_send_back_fails_the_client_resends_to_the_retry_topic(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        track: Callable[[Any], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = track(PushConsumer("ResendCG", client_config))
    consumer.subscribe(TOPIC, "*")
    inbox, failures = Inbox(), []
    consumer.register_concurrently(failing_once(inbox, failures))

    async def unreachable(addr: str, header: ConsumerSendMsgBackRequestHeader) -> None:
        raise UnreachableError([(addr, RemotingClosedError("gone", addr))], role="broker")

    monkeypatch.setattr(consumer.instance.api, "send_back", unreachable)
    await consumer.start()
    sent = await producer.send(Message(TOPIC, b"resend me", tags="T"))
    await inbox.wait_for(1)
    again = inbox.messages[0]
    assert again.msg_id == sent.msg_id and again.body == b"resend me"
    assert again.topic == TOPIC and again.queue_topic == "%RETRY%ResendCG"
    assert again.reconsume_times == 1  # RECONSUME_TIME went into the header
    assert again.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
    assert again.properties.get("MAX_RECONSUME_TIMES") is None  # header field, not a property


async def test_messages_failing_past_max_reconsume_times_go_to_the_dlq(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        track: Callable[[Any], Any]) -> None:
    consumer = track(PushConsumer("DeadCG", client_config,
                                  options=ConsumerOptions(max_reconsume_times=1)))
    consumer.subscribe(TOPIC, "*")
    attempts: list[int] = []
    buried = asyncio.Event()

    def always_fails(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                     ) -> ConsumeConcurrentlyStatus:
        attempts.extend(m.reconsume_times for m in msgs)
        return LATER

    consumer.register_concurrently(always_fails)
    original = consumer.instance.api.send_back

    async def send_back(addr: str, header: ConsumerSendMsgBackRequestHeader) -> None:
        await original(addr, header)
        if len(attempts) == 2:
            buried.set()

    consumer.instance.api.send_back = send_back  # type: ignore[method-assign]
    await consumer.start()
    await producer.send(Message(TOPIC, b"doomed"))
    async with asyncio.timeout(60):
        await buried.wait()
    assert attempts == [0, 1]
    assert broker.state.store.get_max_offset_in_queue("%DLQ%DeadCG", 0) == 1


async def test_orderly_consumption_retries_in_place_under_a_queue_lock(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        track: Callable[[Any], Any]) -> None:
    consumer = track(PushConsumer("OrderCG", client_config, options=ConsumerOptions(
        suspend_current_queue_time_millis=10)))
    consumer.subscribe(TOPIC, "*")
    seen: list[tuple[str, int]] = []
    inbox = Inbox()
    locked_while_consuming: list[bool] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        mq = ctx.message_queue
        locked_while_consuming.append(broker.state.locks.is_locked(
            "OrderCG", mq, consumer.instance.client_id))
        m = msgs[0]
        seen.append((m.body.decode(), m.reconsume_times))
        if m.body == b"o-3" and m.reconsume_times < 2:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        inbox.add(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer.register_orderly(listener)
    await consumer.start()
    for i in range(8):
        await producer.send_select(Message(TOPIC, f"o-{i}".encode()), select_by_hash, 1)
    await inbox.wait_for(8)
    assert inbox.bodies() == [f"o-{i}" for i in range(8)]
    assert seen[:6] == [("o-0", 0), ("o-1", 0), ("o-2", 0), ("o-3", 0), ("o-3", 1), ("o-3", 2)]
    assert all(locked_while_consuming)
    mq = MessageQueue(TOPIC, "broker-a", 1)
    assert consumer.offset_store.table[mq] == 8
    assert all(pq.locked for q, pq in consumer.rebalancer.table.items())
    await consumer.shutdown()  # unlocks its queues at the broker
    assert not broker.state.locks.is_locked("OrderCG", mq, consumer.instance.client_id)


async def test_orderly_messages_past_max_reconsume_times_go_to_the_dlq(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        track: Callable[[Any], Any]) -> None:
    options = ConsumerOptions(suspend_current_queue_time_millis=10, max_reconsume_times=2)
    consumer = track(PushConsumer("OrderDeadCG", client_config, options=options))
    consumer.subscribe(TOPIC, "*")
    inbox = Inbox()
    tries: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        if msgs[0].body == b"poison":
            tries.append(msgs[0].reconsume_times)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        inbox.add(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer.register_orderly(listener)
    await consumer.start()
    for body in (b"before", b"poison", b"after"):
        await producer.send_select(Message(TOPIC, body), select_by_hash, 0)
    await inbox.wait_for(2)
    assert inbox.bodies() == ["before", "after"]
    assert tries == [0, 1, 2]
    # As a Java broker does, ours keeps the resend's DELAY (3 + reconsumeTimes) on the way to
    # the DLQ, so the message reaches %DLQ% once that level's delay (1 s here) is over.
    store = broker.state.store
    await asyncio.wait_for(store.wait_for_arrival("%DLQ%OrderDeadCG", 0, 0), 10)
    entry = store.get_queue_entry("%DLQ%OrderDeadCG", 0, 0)
    assert entry is not None
    record = decode_record(store.look_message_by_offset(entry[0]) or b"")
    assert record.body == b"poison" and record.properties()["RETRY_TOPIC"] == TOPIC
    assert record.reconsume_times == 2
