"""A timer message consumed with POP: delivered at its time, and when not acknowledged it
comes back through the group's retry topic once, at once, not timed a second time."""

from __future__ import annotations

import time
from pathlib import Path

from engine.client import ClientConfig, Message, Producer
from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.pop_consumer import PopConsumer
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.topic import TopicConfig

from .conftest import running_broker

INVISIBLE_MS = 500


async def _receive(consumer: PopConsumer, deadline_s: float) -> list:
    """Pop in short polls: a revived message lands in the V1 retry topic, which (as in
    5.3.3) wakes no held pop, so it waits for the next pop."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        got = await consumer.receive(poll_ms=100)
        if got:
            return got
    return []


async def test_a_popped_timer_message_comes_back_once_untimed(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv, revive_interval=200) as broker:
        broker.state.topics.put(TopicConfig("Timed", 1, 1))
        config = ClientConfig(namesrv_addr=f"127.0.0.1:{namesrv.port}")
        producer = Producer("TimedPG", config)
        consumer = PopConsumer("TimedCG", config, options=PopOptions(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            invisible_time_millis=INVISIBLE_MS))
        consumer.subscribe("Timed")
        await producer.start()
        await consumer.start()
        try:
            due = int(time.time() * 1000) + 1000
            await producer.send(Message("Timed", b"later", deliver_time_ms=due))
            first = await _receive(consumer, 10)
            assert [m.body for m in first] == [b"later"]
            assert time.time() * 1000 >= due - 50  # not before its time
            popped = time.time()
            again = await _receive(consumer, 10)  # not acked: back after the invisible time
            assert [(m.body, m.reconsume_times) for m in again] == [(b"later", 1)]
            assert time.time() - popped < 5  # revived at once, not parked as a timer again
            await consumer.ack(again[0])
            # Neither a second revival (within a revive round) nor the acked message after
            # another invisible time: the pop looks again when its poll runs out.
            assert await consumer.receive(poll_ms=INVISIBLE_MS + 300) == []
        finally:
            await consumer.shutdown()
            await producer.shutdown()
