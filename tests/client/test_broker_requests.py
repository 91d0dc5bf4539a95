"""What brokers ask a client: running info, consume directly, status, offset reset."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.client.produce.producer import Producer
from engine.protocol.body.admin import CMResult

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "AskedTopic"
GROUP = "AskedCG"


@pytest.fixture
async def setup(start_broker: BrokerFactory, client_config: ClientConfig,
                track: Callable[[Any], Any]
                ) -> tuple[BrokerController, Producer, PushConsumer, Inbox]:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=2)
    producer: Producer = track(Producer("AskedPG", client_config))
    await producer.start()
    consumer: PushConsumer = track(PushConsumer(GROUP, client_config))
    consumer.subscribe(TOPIC, "*")
    inbox = Inbox()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        inbox.add(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_concurrently(listener)
    await consumer.start()
    for i in range(4):
        await producer.send(Message(TOPIC, f"m{i}".encode()))
    await inbox.wait_for(4)
    return broker, producer, consumer, inbox


async def test_running_info_and_status_are_reported(
        setup: tuple[BrokerController, Producer, PushConsumer, Inbox],
        broker_admin: BrokerAdmin) -> None:
    broker, _, consumer, _ = setup
    info = await broker_admin.consumer_running_info(broker.addr, GROUP,
                                                    consumer.instance.client_id)
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info.properties["PROP_CONSUME_ORDERLY"] == "false"
    assert {s.topic for s in info.subscription_set} == {TOPIC, "%RETRY%AskedCG"}
    offsets = {mq.queue_id: pq.commit_offset for mq, pq in info.mq_table.items()
               if mq.topic == TOPIC}
    assert offsets == {0: 2, 1: 2}
    status = await broker_admin.consumer_status(broker.addr, TOPIC, GROUP)
    (table,) = status.consumer_table.values()
    assert sorted(table.values()) == [2, 2]


async def test_consume_message_directly_runs_the_listener(
        setup: tuple[BrokerController, Producer, PushConsumer, Inbox],
        broker_admin: BrokerAdmin) -> None:
    broker, producer, consumer, inbox = setup
    sent = await producer.send(Message(TOPIC, b"again please"))
    await inbox.wait_for(5)
    result = await broker_admin.consume_message_directly(
        broker.addr, GROUP, consumer.instance.client_id, sent.offset_msg_id)
    assert result.consume_result is CMResult.CR_SUCCESS and result.order is False
    await inbox.wait_for(6)
    assert inbox.messages[-1].body == b"again please"


#: body -> (what the listener answers, the CONSUME_MESSAGE_DIRECTLY verdict), per service.
VERDICTS: dict[bool, dict[bytes, tuple[object, CMResult]]] = {
    False: {b"ok": (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, CMResult.CR_SUCCESS),
            b"later": (ConsumeConcurrentlyStatus.RECONSUME_LATER, CMResult.CR_LATER),
            b"null": (None, CMResult.CR_RETURN_NULL),
            b"foreign": (ConsumeOrderlyStatus.COMMIT, CMResult.CR_RETURN_NULL)},
    True: {b"ok": (ConsumeOrderlyStatus.SUCCESS, CMResult.CR_SUCCESS),
           b"commit": (ConsumeOrderlyStatus.COMMIT, CMResult.CR_COMMIT),
           b"rollback": (ConsumeOrderlyStatus.ROLLBACK, CMResult.CR_ROLLBACK),
           b"later": (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, CMResult.CR_LATER),
           b"null": (None, CMResult.CR_RETURN_NULL)},
}


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_consume_directly_answers_each_service_verdict(
        start_broker: BrokerFactory, client_config: ClientConfig, track: Callable[[Any], Any],
        broker_admin: BrokerAdmin, orderly: bool) -> None:
    broker = await start_broker()
    await make_topic(broker, "Relayed", queues=1)
    await make_topic(broker, "Own", queues=1)  # the consumer pulls this one, never Relayed
    producer: Producer = track(Producer("DirectPG", client_config))
    await producer.start()
    consumer: PushConsumer = track(PushConsumer("DirectCG", client_config))
    consumer.subscribe("Own", "*")
    verdicts = VERDICTS[orderly]
    called: list[tuple[bytes, str]] = []

    def answer(msgs: list[MessageExt], queue_topic: str) -> Any:
        (msg,) = msgs
        called.append((msg.body, queue_topic))
        if msg.body == b"boom":
            raise RuntimeError("boom")
        return verdicts[msg.body][0]

    if orderly:
        def in_order(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            return answer(msgs, ctx.message_queue.topic)  # a plain listener, called
        consumer.register_orderly(in_order)
    else:
        async def later(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
            return answer(msgs, ctx.message_queue.topic)  # a coroutine listener, awaited
        consumer.register_concurrently(later)
    await consumer.start()
    cases = {body: verdict for body, (_, verdict) in verdicts.items()}
    cases[b"boom"] = CMResult.CR_THROW_EXCEPTION
    for body, verdict in cases.items():
        sent = await producer.send(Message("Relayed", body))
        result = await broker_admin.consume_message_directly(
            broker.addr, "DirectCG", consumer.instance.client_id, sent.offset_msg_id)
        assert (result.consume_result, result.order, result.auto_commit) == (
            verdict, orderly, True), body
        remark = "RuntimeError('boom')" if body == b"boom" else None
        assert result.remark == remark and result.spent_time_mills >= 0
    assert called == [(body, "Relayed") for body in cases]
    assert not any(mq.topic == "Relayed" for mq in consumer.offset_store.table)


async def test_an_offset_reset_restarts_the_queues(
        setup: tuple[BrokerController, Producer, PushConsumer, Inbox],
        broker_admin: BrokerAdmin) -> None:
    broker, _, _, inbox = setup
    table = await broker_admin.reset_offset(broker.addr, TOPIC, GROUP, 0, force=True)
    assert sorted(table.values()) == [0, 0]
    await inbox.wait_for(8)  # all four again
    assert sorted(inbox.bodies()[4:]) == ["m0", "m1", "m2", "m3"]
