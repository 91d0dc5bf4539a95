"""The receive side through Apache 5.3.3's proxy and through ours: the same answers, and
empty long polls that end at the same time (opt-in, APACHE_RMQ5_HOME; tests/apache5.py starts
Apache's name server and broker with its proxy).

The same requests as tests/proxy/test_receive_rules.py, with both proxies at their defaults
(long polling between 5 and 20 s): the polling time against the deadline, invisible times,
batch sizes, filters (SQL92 with enablePropertyFilter off, as both brokers have it), system
topics and groups with a real receipt, and request bytes that do not parse.  Timings are
compared with a tolerance (an empty receive must end within a second of Apache's), never
against a fixed bound.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.differential import routed, topic_creator
from tests.proxy.test_receive_rules import GROUP, Client, headers, undecodable_answers

pytestmark = [needs_apache5, pytest.mark.timeout(600)]
__all__ = ["apache5"]

#: How far apart the two proxies' empty receives may end (a busy machine; 5.3.3's own spread
#: is tens of ms).
TOLERANCE_S = 1.0


def _timed(answer: Any) -> tuple[Any, float]:
    return answer.code, answer.seconds


async def scenario(client: Client) -> tuple[dict[str, Any], dict[str, float]]:
    """What a proxy answers (codes, messages, counts), and how long its empty receives took."""
    tag = f"{time.time_ns() % 10**9:09d}"
    topic = f"RcvCmp{tag}"
    await client.create_topic(topic)
    await routed(client.stub, topic)
    telemetry = await client.settings(topic=topic)
    seen: dict[str, Any] = {}
    took: dict[str, float] = {}

    async def receive(name: str, deadline_s: float, **kwargs: Any) -> Any:
        got = await client.receive(deadline_s, topic=topic, **kwargs)
        seen[name] = (got.code, got.status.message if got.status else "", len(got.messages))
        if got.code == pb.MESSAGE_NOT_FOUND:
            took[name] = got.seconds
        return got

    # polling time against the deadline (the topic is empty)
    await receive("polling 0, 3 s left", 3, polling_ms=0)
    await receive("polling 0, 3 s left, client 5.0.0", 3, polling_ms=0, version="5.0.0")
    await receive("polling 0, 10 s left", 10, polling_ms=0)
    await receive("polling 5 s, 8 s left", 8, polling_ms=5000)
    await receive("no polling time, 8 s left", 8, polling_ms=None)
    await receive("polling 60 s, 6 s left", 6, polling_ms=60_000)
    # invisible times
    for invisible in (None, 5000, 12 * 3600_000 + 1):
        await receive(f"invisible {invisible}", 8, invisible_ms=invisible)
    # batch sizes (100 messages waiting)
    await client.send(100, topic)
    for batch in (33, 64, 1_000_000):
        await receive(f"batch {batch}", 8, polling_ms=5000, batch=batch)
    await receive("batch 0", 8, polling_ms=5000, batch=0)
    got = await client.receive(8, topic=topic, batch=-1)
    seen["batch -1"] = got.code  # 5.3.3's text is a Java exception's
    seen["the rest"] = len((await client.receive(8, topic=topic)).messages)
    # filters
    for name, kind, text in (("sql empty", pb.SQL, ""), ("tag ||", pb.TAG, "||")):
        await receive(f"filter {name}", 8, expression=pb.FilterExpression(type=kind,
                                                                          expression=text))
    await client.send(1, topic, a="1")
    await client.send(1, topic, a="2")
    got = await client.receive(8, topic=topic, expression=pb.FilterExpression(
        type=pb.SQL, expression="a > 1"))
    seen["filter sql a > 1"] = (got.code, [m.user_properties["a"] for m in got.messages])
    # system topics and groups, with a real receipt
    await client.send(1, topic)
    (msg,) = (await client.receive(8, topic=topic, batch=1)).messages
    entry = spb.AckMessageEntry(message_id=msg.system_properties.message_id,
                                receipt_handle=msg.system_properties.receipt_handle)
    for system in ("SCHEDULE_TOPIC_XXXX", "TBW102"):
        ack = await client.stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=system), entries=[entry]),
            metadata=headers(), timeout=10)
        seen[f"ack {system}"] = (ack.status.code, ack.status.message, len(ack.entries))
        change = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=system),
            receipt_handle=entry.receipt_handle, message_id=entry.message_id)
        change.invisible_duration.FromSeconds(20)
        answer = await client.stub.ChangeInvisibleDuration(change, metadata=headers(),
                                                           timeout=10)
        seen[f"change {system}"] = (answer.status.code, answer.status.message)
    ack = await client.stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name="CID_RMQ_SYS_X"), topic=pb.Resource(name=topic),
        entries=[entry]), metadata=headers(), timeout=10)
    seen["ack system group"] = (ack.status.code, ack.status.message)
    await telemetry.done_writing()
    seen["undecodable"] = await undecodable_answers(client.endpoint)
    return seen, took


def four_queues(broker_addr: str) -> Callable[[str], Awaitable[None]]:
    """Topics of four queues made on `broker_addr`."""
    create = topic_creator(broker_addr)
    return lambda topic: create(topic, 4, None)


async def test_receives_are_answered_as_apache_5_3_3_answers_them(
        apache5: Apache5, tmp_path: Path, namesrv: NamesrvController) -> None:
    async with grpc.aio.insecure_channel(apache5.grpc) as channel:
        theirs, their_times = await scenario(Client(
            service_pb2_grpc.MessagingServiceStub(channel), apache5.grpc,
            four_queues(apache5.broker)))
    async with (running_stack(tmp_path, namesrv) as stack,
                grpc.aio.insecure_channel(stack.endpoint) as channel):
        ours, our_times = await scenario(Client(
            service_pb2_grpc.MessagingServiceStub(channel), stack.endpoint,
            stack.create_topic, stack))
    assert ours == theirs
    assert our_times.keys() == their_times.keys()
    for name, seconds in their_times.items():
        assert abs(our_times[name] - seconds) < TOLERANCE_S, (name, our_times[name], seconds)
