"""Our POP consumer (`engine.client.consume.pop_consumer`) on our broker: receive and ack,
redelivery, listening with nothing left behind, retries into the DLQ, and FIFO
with two consumers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from engine.broker.controller import BrokerController
from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.pop_consumer import PopConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.pop_calls import AckStatus
from engine.client.core.results import ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import decode_records

from .conftest import BrokerFactory, make_topic

T = TypeVar("T")
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


async def _producer(client_config: ClientConfig, track: Callable[[T], T]) -> Producer:
    producer = track(Producer("PG_POP", client_config))
    await producer.start()
    return producer


async def _consumer(client_config: ClientConfig, track: Callable[[T], T], group: str,
                    topic: str, **options: object) -> PopConsumer:
    consumer = track(PopConsumer(group, client_config, options=replace(
        PopOptions(consume_from_where=FIRST, poll_time_millis=1000), **options)))
    consumer.subscribe(topic)
    await consumer.start()
    return consumer


async def _until(check: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def _received(c: PopConsumer, n: int, timeout: float = 20) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with asyncio.timeout(timeout):
        while len(got) < n:
            got += await c.receive()
    return got


async def test_receive_ack_batch_ack_change_invisible_and_redelivery(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[T], T]) -> None:
    broker = await start_broker(revive_interval=50)
    await make_topic(broker, "PopC1", 2)
    producer = await _producer(client_config, track)
    sent = {(await producer.send(Message("PopC1", b"m%d" % i))).msg_id for i in range(6)}
    # 100 ms polls: msgs[5] comes back through the V1 pop retry topic, which (as in 5.3.3)
    # wakes no held pop; the next pop takes it.
    c = await _consumer(client_config, track, "CG_POPC1", "PopC1", invisible_time_millis=1500,
                        poll_time_millis=100)
    msgs = await _received(c, 6)
    assert {m.msg_id for m in msgs} == sent
    assert await c.ack(msgs[0]) is AckStatus.OK
    assert await c.batch_ack(msgs[1:4]) is AckStatus.OK
    longer = await c.change_invisible_time(msgs[4], 60_000)
    assert await c.ack(longer) is AckStatus.OK
    again = await _received(c, 1)  # msgs[5], neither acked nor extended
    assert [m.msg_id for m in again] == [msgs[5].msg_id]
    assert again[0].reconsume_times == 1 and again[0].topic == "PopC1"
    assert await c.ack(again[0]) is AckStatus.OK
    assert await c.receive(poll_ms=300) == []


async def test_listening_consumer_leaves_nothing_in_flight(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[T], T]) -> None:
    broker = await start_broker()
    await make_topic(broker, "PopC2", 4)
    producer = await _producer(client_config, track)
    sent = {(await producer.send(Message("PopC2", b"x%d" % i))).msg_id for i in range(200)}
    seen: list[str] = []

    def listener(m: MessageExt) -> ConsumeConcurrentlyStatus:
        seen.append(m.msg_id)
        return OK

    c = await _consumer(client_config, track, "CG_POPC2", "PopC2")
    c.listen(listener)
    await _until(lambda: set(seen) >= sent)
    st = broker.state
    await _until(lambda: all(st.pop.inflight("PopC2", "CG_POPC2", q) == 0 for q in range(4)))
    assert len(seen) == 200  # each once
    assert sum(st.offsets.queue_offsets("CG_POPC2", "PopC2").values()) == 200


async def test_failing_listener_retries_then_dead_letters(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[T], T]) -> None:
    """max_reconsume_times 2: delivered with reconsume times 0, 1, 2; popped the fourth time
    (reconsume times 3) it goes to %DLQ%<group> as 5.3.3's proxy sends it there (a send-back
    of the pop retry topic's message): reconsume times 4, RETRY_TOPIC the pop retry topic,
    DELAY 0, WAIT false; and it is not delivered again."""
    broker = await start_broker(revive_interval=50)
    await make_topic(broker, "PopC3", 1)
    producer = await _producer(client_config, track)
    sent = await producer.send(Message("PopC3", b"poison", tags="TagA", keys="KeyA",
                                       properties={"k": "v"}))
    attempts: list[int] = []

    def listener(m: MessageExt) -> ConsumeConcurrentlyStatus:
        attempts.append(m.reconsume_times)
        return LATER

    # 100 ms polls: a retry lands in the V1 pop retry topic, which (as in 5.3.3) wakes no
    # held pop; the next pop takes it.
    c = await _consumer(client_config, track, "CG_POPC3", "PopC3", retry_backoff_millis=100,
                        max_reconsume_times=2, poll_time_millis=100)
    c.listen(listener)
    store, pop = broker.state.store, broker.state.pop
    await _until(lambda: store.get_max_offset_in_queue("%DLQ%CG_POPC3", 0) == 1)
    retry = "%RETRY%CG_POPC3_PopC3"
    # the forward's ack: nothing of the group in flight, on the topic or its retry topic
    await _until(lambda: pop.inflight("PopC3", "CG_POPC3", 0) == 0
                 and pop.inflight(retry, "CG_POPC3", 0) == 0)
    assert attempts == [0, 1, 2]
    [dead] = decode_records(store.get_message("X", "%DLQ%CG_POPC3", 0, 0, 1).body)
    assert (dead.topic, dead.body, dead.reconsume_times) == ("%DLQ%CG_POPC3", b"poison", 4)
    props = dead.properties()
    assert props["UNIQ_KEY"] == sent.msg_id and props["ORIGIN_MESSAGE_ID"]
    assert {k: props[k] for k in ("RETRY_TOPIC", "DELAY", "WAIT", "TAGS", "KEYS", "k")} == {
        "RETRY_TOPIC": retry, "DELAY": "0", "WAIT": "false", "TAGS": "TagA", "KEYS": "KeyA",
        "k": "v"}
    # nothing more comes: the retry topic's last message was popped and acked
    assert store.get_max_offset_in_queue(retry, 0) == 3
    assert broker.state.offsets.query("CG_POPC3", retry, 0) == 3
    assert attempts == [0, 1, 2]


async def test_fifo_two_consumers_each_queue_in_order(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[T], T]) -> None:
    broker: BrokerController = await start_broker()
    await make_topic(broker, "PopC4", 2)
    producer = await _producer(client_config, track)
    for i in range(30):
        queue = i % 2
        await producer.send_to_queue(Message("PopC4", f"{queue}:{i // 2}".encode()),
                                     MessageQueue("PopC4", "broker-a", queue))
    handled: list[tuple[str, int, int]] = []  # (consumer, queue, sequence)
    busy: set[int] = set()
    overlaps: list[int] = []

    def listener_of(name: str) -> Callable[[MessageExt], object]:
        async def listener(m: MessageExt) -> ConsumeConcurrentlyStatus:
            queue, seq = map(int, m.body.decode().split(":"))
            if queue in busy:
                overlaps.append(queue)
            busy.add(queue)
            await asyncio.sleep(0.001)
            busy.discard(queue)
            handled.append((name, queue, seq))
            return OK
        return listener

    for name in ("A", "B"):
        c = await _consumer(client_config, track, "CG_POPC4", "PopC4", order=True,
                            pop_batch_size=4)
        c.listen(listener_of(name))  # type: ignore[arg-type]
    await _until(lambda: len(handled) >= 30)
    for queue in (0, 1):
        assert [seq for _, q, seq in handled if q == queue] == list(range(15))
    assert overlaps == []  # a queue is never in two consumers' hands at once
