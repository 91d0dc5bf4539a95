"""A push consumer shut down while listener calls wait for a consume slot leaves no
coroutine un-awaited (they are closed, and their messages are delivered again later)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable
from typing import Any

from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere

from .conftest import BrokerFactory, make_topic

TOPIC = "ShutdownTopic"


async def test_listener_calls_waiting_for_a_slot_are_closed_at_shutdown(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    producer: Producer = track(Producer("ShutdownPG", client_config))
    await producer.start()
    for i in range(8):
        await producer.send(Message(TOPIC, f"m{i}".encode()))
    started = asyncio.Event()

    async def stuck(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                    ) -> ConsumeConcurrentlyStatus:
        started.set()
        await asyncio.Event().wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    options = ConsumerOptions(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              consume_thread_max=1, await_termination_millis=100)
    consumer = PushConsumer("ShutdownCG", client_config, options=options)
    consumer.subscribe(TOPIC, "*")
    consumer.register_concurrently(stuck)
    await consumer.start()
    await started.wait()  # one listener holds the only slot; the other seven wait for it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await consumer.shutdown()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
