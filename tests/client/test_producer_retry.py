"""Retries onto another broker: one of two brokers refuses or is gone; fault tolerance on/off."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import NoPermissionError, SendFailedError, UnreachableError
from engine.client.core.message import Message
from engine.client.produce.producer import Producer, ProducerOptions
from engine.protocol.perm import PERM_READ

from .conftest import BrokerFactory, make_topic

TOPIC = "RetryTopic"


async def two_brokers(start_broker: BrokerFactory) -> tuple[BrokerController, BrokerController]:
    a = await start_broker("broker-a")
    b = await start_broker("broker-b")
    for broker in (a, b):
        await make_topic(broker, TOPIC)
    return a, b


def refuse_writes(broker: BrokerController) -> None:
    """The broker turns read-only without telling the name server (the route stays)."""
    st = broker.state
    st.replace_config(dataclasses.replace(st.config, broker_permission=PERM_READ))


def stored_on(broker: BrokerController) -> int:
    return sum(broker.state.store.get_max_offset_in_queue(TOPIC, q) for q in range(4))


@pytest.mark.parametrize("fault_tolerance", [False, True])
async def test_sends_move_to_the_other_broker_when_one_refuses(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any], fault_tolerance: bool) -> None:
    a, b = await two_brokers(start_broker)
    producer = track(Producer("RetryPG", client_config, options=ProducerOptions(
        send_latency_fault_enable=fault_tolerance)))
    await producer.start()
    await producer.send(Message(TOPIC, b"warm-up"))  # learn the route: 8 queues on 2 brokers
    refuse_writes(b)
    results = [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(10)]
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    assert stored_on(b) <= 1  # only, perhaps, the warm-up
    assert stored_on(a) + stored_on(b) == 11
    if fault_tolerance:
        assert not producer.fault.is_available("broker-b")  # banned for 600 s
        assert producer.fault.is_available("broker-a")
    else:
        assert producer.fault.items == {}


async def test_a_broker_that_went_away_is_skipped(start_broker: BrokerFactory,
                                                  client_config: ClientConfig,
                                                  track: Callable[[Any], Any]) -> None:
    a, b = await two_brokers(start_broker)
    producer = track(Producer("GonePG", client_config))
    await producer.start()
    await producer.fetch_publish_queues(TOPIC)
    await b.stop()  # the route still names it until the name server notices
    results = [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(8)]
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    assert stored_on(a) == 8


async def test_every_attempt_failing_raises_with_each_cause(start_broker: BrokerFactory,
                                                            client_config: ClientConfig,
                                                            track: Callable[[Any], Any]) -> None:
    a, b = await two_brokers(start_broker)
    producer = track(Producer("DoomedPG", client_config))
    await producer.start()
    await producer.fetch_publish_queues(TOPIC)
    refuse_writes(a)
    refuse_writes(b)
    with pytest.raises(SendFailedError) as failed:
        await producer.send(Message(TOPIC, b"nowhere"))
    causes = failed.value.errors
    assert len(causes) == 3  # 1 + retryTimesWhenSendFailed
    assert all(isinstance(exc, NoPermissionError) for _, exc in causes)
    assert [name for name, _ in causes] in (["broker-a", "broker-b", "broker-a"],
                                            ["broker-b", "broker-a", "broker-b"])
    await a.stop()
    await b.stop()
    with pytest.raises(SendFailedError) as failed:
        await producer.send(Message(TOPIC, b"nowhere"))
    assert all(isinstance(exc, UnreachableError) for _, exc in failed.value.errors)
