"""Timer messages from the client library: `Message(deliver_time_ms=/delay_time_sec=/
delay_time_ms=)` writes 5.x's TIMER_* properties; a push consumer receives each message no
earlier than its time, with the broker's TIMER_OUT_MS / TIMER_DEQUEUE_MS."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import MessageValidationError
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "TimedTopic"


def test_timer_fields_write_the_5x_properties() -> None:
    props = Message(TOPIC, b"x", deliver_time_ms=1_800_000_000_000).properties_map()
    assert props["TIMER_DELIVER_MS"] == "1800000000000"
    assert Message(TOPIC, b"x", delay_time_sec=30).properties_map()["TIMER_DELAY_SEC"] == "30"
    assert Message(TOPIC, b"x", delay_time_ms=1500).properties_map()["TIMER_DELAY_MS"] == "1500"
    assert not any(k.startswith("TIMER_") for k in Message(TOPIC, b"x").properties_map())
    kept = Message(TOPIC, b"x", delay_time_ms=5).with_system_properties(UNIQ_KEY="u")
    assert kept.properties_map()["TIMER_DELAY_MS"] == "5"
    with pytest.raises(MessageValidationError):
        Message(TOPIC, b"x", properties={"TIMER_DELIVER_MS": "1"})  # reserved, as in Java 5


async def test_push_consumer_receives_timers_at_their_time(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=2)
    producer: Producer = track(Producer("TimedPG", client_config))
    await producer.start()
    consumer: PushConsumer = track(PushConsumer("TimedCG", client_config))
    consumer.subscribe(TOPIC, "*")
    inbox = Inbox()
    arrived: dict[str, int] = {}

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            arrived[m.body.decode()] = int(time.time() * 1000)
        inbox.add(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_concurrently(listener)
    await consumer.start()
    sent_at = int(time.time() * 1000)
    await producer.send(Message(TOPIC, b"at", deliver_time_ms=sent_at + 1_200))
    await producer.send(Message(TOPIC, b"ms", delay_time_ms=800))
    await producer.send(Message(TOPIC, b"sec", delay_time_sec=1))
    await producer.send(Message(TOPIC, b"now"))
    await inbox.wait_for(4)
    assert arrived["at"] >= sent_at + 1_200
    assert arrived["ms"] >= sent_at + 800
    assert arrived["sec"] >= sent_at + 1_000
    timed = {m.body: m.properties for m in inbox.messages}
    assert int(timed[b"ms"]["TIMER_DEQUEUE_MS"]) >= int(timed[b"ms"]["TIMER_OUT_MS"])
    assert "TIMER_OUT_MS" not in timed[b"now"]
