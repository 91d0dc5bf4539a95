"""Message trace on our broker: a traced producer and push consumer write Pub, SubBefore and
SubAfter records to the trace topic; a refused or full trace path never fails a send."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from engine.client.admin.broker import BrokerAdmin
from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.instance import ClientInstance
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    SendResult,
    SendStatus,
)
from engine.client.produce.producer import Producer, trace_producer
from engine.client.produce.producer_options import ProducerOptions
from engine.client.produce.transaction import TransactionProducer
from engine.client.trace.dispatch import KEYS_BYTES, TraceDispatcher
from engine.client.trace.hooks import SendTracer
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import PROPERTY_TRANSACTION_PREPARED
from engine.protocol.trace import (
    TRACE_TOPIC,
    ConsumeReturnType,
    EndTransactionRecord,
    MessageType,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceRecord,
    decode,
    encode,
)
from engine.remoting.client import RemotingClient

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "TracedTopic"
TRACED = ProducerOptions(enable_trace=True)


async def traces_of(addr: str, msg_id: str, topic: str = TRACE_TOPIC) -> list[TraceRecord]:
    """The trace records naming `msg_id`, found as queryMsgTraceById finds them: by key."""
    client = RemotingClient()
    try:
        found = await BrokerAdmin(client, timeout=5.0).query_message(addr, topic, msg_id)
    finally:
        await client.close()
    return [r for m in found.messages for r in decode(m.body).records if r.msg_id == msg_id]


async def test_traced_producer_and_consumer_write_pub_sub_before_and_sub_after(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await make_topic(broker, TOPIC)
    producer: Producer = track(Producer("TracePG", client_config, options=TRACED))
    await producer.start()
    consumer: PushConsumer = track(PushConsumer("TraceCG", client_config, options=ConsumerOptions(
        enable_trace=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)))
    inbox = Inbox()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        inbox.add(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe(TOPIC, "*")
    consumer.register_concurrently(listener)
    await consumer.start()

    result = await producer.send(Message(TOPIC, b"traced body", tags="TagA",
                                         keys=["order-1", "customer-9"]))
    assert result.status is SendStatus.SEND_OK
    await inbox.wait_for(1)
    assert producer.tracer is not None and consumer.tracer is not None
    await producer.tracer.dispatcher.flush()
    await consumer.tracer.dispatcher.flush()

    records = await traces_of(broker.addr, result.msg_id)
    pubs = [r for r in records if isinstance(r, PubRecord)]
    befores = [r for r in records if isinstance(r, SubBeforeRecord)]
    afters = [r for r in records if isinstance(r, SubAfterRecord)]
    assert len(pubs) == len(befores) == len(afters) == 1, records
    pub, before, after = pubs[0], befores[0], afters[0]
    assert (pub.group, pub.topic, pub.tags, pub.keys) == ("TracePG", TOPIC, "TagA",
                                                          "order-1 customer-9")
    assert (pub.store_host, pub.offset_msg_id, pub.region_id) == (
        broker.addr, result.offset_msg_id, "DefaultRegion")
    assert (pub.body_length, pub.msg_type, pub.success) == (11, MessageType.NORMAL, True)
    assert pub.cost_ms >= 0
    # the stored message has no MSG_REGION (Apache's broker adds it only with a send hook),
    # so SubBefore's region is Java's "null"
    assert (before.group, before.retry_times, before.keys, before.region_id) == (
        "TraceCG", 0, "order-1 customer-9", None)
    assert before.timestamp >= pub.timestamp
    assert (after.request_id, after.group, after.success) == (before.request_id, "TraceCG", True)
    assert after.context_code == ConsumeReturnType.SUCCESS
    assert after.timestamp is not None and after.timestamp >= before.timestamp
    # the trace messages are found by the traced message's keys too, as Apache's KEYS hold them
    client = RemotingClient()
    try:
        by_key = await BrokerAdmin(client).query_message(broker.addr, TRACE_TOPIC, "customer-9")
    finally:
        await client.close()
    assert len(by_key.messages) >= 1
    assert producer.tracer.dispatcher.dropped == producer.tracer.dispatcher.failed == 0


async def test_a_failed_listener_is_traced_as_failed(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await make_topic(broker, TOPIC)
    producer: Producer = track(Producer("TracePG2", client_config))
    await producer.start()
    consumer: PushConsumer = track(PushConsumer("TraceCG2", client_config, options=ConsumerOptions(
        enable_trace=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)))
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        done.set()
        raise RuntimeError("listener fails")

    consumer.subscribe(TOPIC, "*")
    consumer.register_concurrently(listener)
    await consumer.start()
    result = await producer.send(Message(TOPIC, b"x"))
    async with asyncio.timeout(60):
        await done.wait()
    assert consumer.tracer is not None
    await consumer.tracer.dispatcher.flush()
    afters = [r for r in await traces_of(broker.addr, result.msg_id)
              if isinstance(r, SubAfterRecord)]
    assert afters and not afters[0].success
    assert afters[0].context_code == ConsumeReturnType.EXCEPTION


async def test_a_refused_trace_send_neither_fails_nor_blocks_the_business_send(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    # the broker refuses sends to its schedule topic (NO_PERMISSION): every trace send fails
    refused = ProducerOptions(enable_trace=True, trace_topic="SCHEDULE_TOPIC_XXXX")
    producer: Producer = track(Producer("RefusedPG", client_config, options=refused))
    await producer.start()
    results = [await producer.send(Message(TOPIC, b"%d" % i)) for i in range(3)]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert producer.tracer is not None
    dispatcher = producer.tracer.dispatcher
    await dispatcher.flush()
    assert (dispatcher.sent, dispatcher.failed) == (0, 3)
    assert (await producer.send(Message(TOPIC, b"after"))).status is SendStatus.SEND_OK


async def test_a_full_trace_queue_drops_and_counts_records(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await make_topic(broker, TOPIC)
    producer: Producer = track(Producer("FullPG", client_config, options=TRACED))
    await producer.start()
    assert producer.tracer is not None
    # a dispatcher that holds two records and is not draining: appends never wait
    small = TraceDispatcher(trace_producer(producer.instance, "FullPG", "PRODUCER"),
                            queue_size=2)
    producer.tracer.dispatcher = small
    results = [await producer.send(Message(TOPIC, b"%d" % i)) for i in range(5)]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert small.dropped == 3
    track(_Stopper(small))
    await small.start()
    await small.flush()
    assert small.sent == 2
    [pub] = await traces_of(broker.addr, results[0].msg_id)
    assert isinstance(pub, PubRecord)


class _Stopper:
    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    async def shutdown(self) -> None:
        await self.dispatcher.stop()


class _Commit:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_a_traced_transaction_records_its_half_message_and_its_end(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await make_topic(broker, TOPIC)
    producer: TransactionProducer = track(TransactionProducer("TxTracePG", _Commit(),
                                                              client_config, options=TRACED))
    await producer.start()
    sent = await producer.send_in_transaction(Message(TOPIC, b"pay", tags="paid", keys="p-1"))
    assert producer.tracer is not None
    await producer.tracer.dispatcher.flush()
    records = await traces_of(broker.addr, sent.send_result.msg_id)
    [pub] = [r for r in records if isinstance(r, PubRecord)]
    [end] = [r for r in records if isinstance(r, EndTransactionRecord)]
    assert pub.msg_type is MessageType.TRANS_HALF
    assert (end.group, end.topic, end.tags, end.keys) == ("TxTracePG", TOPIC, "paid", "p-1")
    assert (end.transaction_state, end.from_transaction_check) == ("COMMIT_MESSAGE", False)
    assert (end.store_host, end.msg_type) == (broker.addr, MessageType.TRANS_COMMIT)
    assert end.transaction_id == sent.transaction_id


async def test_a_batch_takes_records_up_to_its_size_and_their_keys_in_order() -> None:
    """At most `batch_records` records, or 118 KB of text (the record passing it included);
    the rest stay queued in their order; the keys are each record's message id and KEYS."""
    dispatcher = TraceDispatcher(trace_producer(ClientInstance(), "G", "PRODUCER"),
                                 batch_records=3)
    big = "x" * 50_000
    for i in range(4):
        dispatcher.append_encoded(f"{i}{big}", f"ID{i}", None if i % 2 else f"k{i} a  b")
    texts, keys = dispatcher._take()
    assert [t[0] for t in texts] == ["0", "1", "2"]
    assert keys == ["ID0", "ID1", "ID2", "k0", "a", "b", "k2", "a", "b"]
    dispatcher.append_encoded("small", "ID4", "k4")
    texts, keys = dispatcher._take()
    assert [t[0] for t in texts] == ["3", "s"] and keys == ["ID3", "ID4", "k4"]
    dispatcher.batch_records = 100
    for i in range(5):
        dispatcher.append_encoded(f"{i}{big}", f"ID{i}", None)
    texts, keys = dispatcher._take()  # 0, 50 and 100 KB queued before: the third passes 118
    assert [t[0] for t in texts] == ["0", "1", "2"] and keys == ["ID0", "ID1", "ID2"]
    assert [t[0] for t, _, _ in dispatcher._queue] == ["3", "4"]


async def test_the_pub_hook_writes_what_encode_writes_for_the_record() -> None:
    """`SendTracer.sent` writes its Pub text itself (the hot path): byte for byte
    `encode(PubRecord)`, whose golden strings are Apache's, for every field's forms."""
    dispatcher = TraceDispatcher(trace_producer(ClientInstance(), "HookPG", "PRODUCER"))
    tracer = SendTracer(dispatcher, "HookPG")
    mq = MessageQueue(TOPIC, "broker-a", 1)
    later = int(time.time() * 1000) + 3_600_000  # began "later": its cost is written as 0
    cases = [
        (Message(TOPIC, b"abc", tags="TagA", keys="k1 k2"), SendStatus.SEND_OK,
         "DefaultRegion", "127.0.0.1:10911", MessageType.NORMAL),
        (Message(TOPIC, b""), SendStatus.FLUSH_DISK_TIMEOUT, "Hangzhou", None,
         MessageType.NORMAL),
        (Message(TOPIC, b"d", delay_time_level=3), SendStatus.SEND_OK, "DefaultRegion",
         "h:1", MessageType.DELAY),
        (Message(TOPIC, b"p", properties={"color": "red"}), SendStatus.SEND_OK,
         "DefaultRegion", "h:1", MessageType.NORMAL),
        (Message(TOPIC, b"t", system_properties={PROPERTY_TRANSACTION_PREPARED: "true"}),
         SendStatus.SEND_OK, "DefaultRegion", "h:1", MessageType.TRANS_HALF),
    ]
    for i, (msg, status, region, host, kind) in enumerate(cases):
        result = SendResult(status, f"MSGID{i}", f"OFFSETID{i}", mq, i, region_id=region)
        tracer.sent(msg, result, host, later)
        text, msg_id, keys = dispatcher._queue.pop()
        expected = PubRecord(later, region, "HookPG", TOPIC, f"MSGID{i}", msg.tags,
                             " ".join(msg.keys) or None, host or "", len(msg.body), 0, kind,
                             f"OFFSETID{i}", status is SendStatus.SEND_OK)
        assert text == encode(expected)
        assert (msg_id, keys) == (f"MSGID{i}", expected.keys)
    began = int(time.time() * 1000) - 50
    tracer.sent(Message(TOPIC, b"x"), SendResult(SendStatus.SEND_OK, "M", "O", mq, 0), "h:1",
                began)
    [pub] = decode(dispatcher._queue.pop()[0]).records
    assert isinstance(pub, PubRecord) and pub.timestamp == began and pub.cost_ms >= 50
    # not traced: the broker said TRACE_ON=false, or the message is itself a trace message
    tracer.sent(Message(TOPIC, b"x"), SendResult(SendStatus.SEND_OK, "M", "O", mq, 0,
                                                 trace_on=False), "h:1", began)
    tracer.sent(Message(TRACE_TOPIC, b"x"), SendResult(SendStatus.SEND_OK, "M", "O", mq, 0),
                "h:1", began)
    assert not dispatcher._queue


async def test_a_batch_keeps_its_keys_within_the_properties_limit() -> None:
    """Records with long KEYS: a batch takes as many as keep its keys within KEYS_BYTES
    (the KEYS property must fit the 32767 bytes of a message's properties); the rest stay
    queued in their order, and a record too long for any batch still goes alone."""
    dispatcher = TraceDispatcher(trace_producer(ClientInstance(), "G", "PRODUCER"))
    long_key = "k" * 9_000
    for i in range(6):
        dispatcher.append_encoded(f"T{i}", f"ID{i}", f"{long_key}{i} shared")
    dispatcher.append_encoded("T6", "ID6", "x" * (KEYS_BYTES + 1))
    taken: list[tuple[list[str], list[str]]] = []
    while dispatcher._queue:
        taken.append(dispatcher._take())
    assert [texts for texts, _ in taken] == [["T0", "T1", "T2"], ["T3", "T4", "T5"], ["T6"]]
    assert taken[0][1] == ["ID0", "ID1", "ID2", f"{long_key}0", "shared", f"{long_key}1",
                           "shared", f"{long_key}2", "shared"]
    assert all(len(" ".join(keys).encode()) <= KEYS_BYTES for _, keys in taken[:2])
