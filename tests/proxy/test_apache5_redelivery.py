"""Redelivery and long polling through Apache 5.3.3's proxy and through ours: the same
delivery attempts, the same codes, and times within a tolerance (opt-in, APACHE_RMQ5_HOME;
tests/apache5.py starts Apache's name server and broker with its proxy).

Raw stubs, as a SimpleConsumer calls them: a message nobody acks comes back after its
invisible time with its delivery attempt raised; one nacked (ChangeInvisibleDuration) comes
back after the new time; one popped for a receive its client gave up comes back after that
receive's invisible time (not after a second); and empty receives at every await time (0, 1,
5, 20, 30 s) as the Python client (long_polling_timeout = await, deadline await + 3 s) and the
Java client (no long_polling_timeout, the same deadline) make them.  And groups a 4.x admin made
broadcast-enabled or not, or not consuming: what two 5.x clients of each are answered.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.broker.conftest import call
from tests.proxy.conftest import running_stack
from tests.proxy.differential import routed
from tests.proxy.test_apache5_receive import four_queues
from tests.proxy.test_receive_rules import GROUP, Client, headers

pytestmark = [needs_apache5, pytest.mark.timeout(900)]
__all__ = ["apache5"]

#: How far apart the two proxies' times may be: the revive of an unacked message runs about
#: once a second on both, and the machine is busy.
TOLERANCE_S = 2.5
INVISIBLE_MS = 10_000  # the least a receive may ask for
AWAITS_S = (0, 1, 5, 20, 30)
REQUEST_TIMEOUT_S = 3  # both official clients' default


async def _until_received(client: Client, topic: str, since: float
                          ) -> tuple[pb.Message, float]:
    """The next message of `topic` for GROUP (receives polling 20 s, none acked), and the
    seconds from `since` to its arrival."""
    for _ in range(10):
        got = await client.receive(25, topic=topic, polling_ms=20_000, batch=1,
                                   invisible_ms=INVISIBLE_MS)
        if got.messages:
            return got.messages[0], time.monotonic() - since
        assert got.code == pb.MESSAGE_NOT_FOUND, got
    raise AssertionError(f"nothing came back on {topic}")


async def _ack(client: Client, topic: str, msg: pb.Message) -> tuple[int, list[int]]:
    ack = await client.stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name=GROUP), topic=pb.Resource(name=topic),
        entries=[spb.AckMessageEntry(message_id=msg.system_properties.message_id,
                                     receipt_handle=msg.system_properties.receipt_handle)]),
        metadata=headers(), timeout=10)
    return ack.status.code, [e.status.code for e in ack.entries]


async def redelivery(client: Client) -> tuple[dict[str, Any], dict[str, float]]:
    """Delivery attempts and codes, and the seconds each redelivery took."""
    tag = f"{time.time_ns() % 10**9:09d}"
    topic, given_up_topic = f"Redeliver{tag}", f"GivenUp{tag}"
    for name in (topic, given_up_topic):
        await client.create_topic(name)
        await routed(client.stub, name)
    telemetry = await client.settings(topic=topic)
    seen: dict[str, Any] = {}
    took: dict[str, float] = {}

    await client.send(1, topic)
    first, _ = await _until_received(client, topic, time.monotonic())
    shown = time.monotonic()
    seen["first attempt"] = first.system_properties.delivery_attempt
    # nobody acks: back after the invisible time, attempt 2
    again, took["unacked back"] = await _until_received(client, topic, shown)
    seen["unacked back"] = (again.system_properties.message_id
                            == first.system_properties.message_id,
                            again.system_properties.delivery_attempt)
    # nacked to 2 s: back after about that, attempt 3
    change = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=GROUP), topic=pb.Resource(name=topic),
        receipt_handle=again.system_properties.receipt_handle,
        message_id=again.system_properties.message_id)
    change.invisible_duration.FromSeconds(2)
    answer = await client.stub.ChangeInvisibleDuration(change, metadata=headers(), timeout=10)
    nacked = time.monotonic()
    seen["nack"] = (answer.status.code, bool(answer.receipt_handle))
    seen["ack receipt before the nack"] = await _ack(client, topic, again)  # not expired
    third, took["nacked back"] = await _until_received(client, topic, nacked)
    seen["nacked back"] = third.system_properties.delivery_attempt
    seen["ack expired receipt"] = await _ack(client, topic, again)  # its 10 s are over
    seen["ack latest"] = await _ack(client, topic, third)
    after = await client.receive(8, topic=topic, polling_ms=5000)
    seen["after the ack"] = (after.code, len(after.messages))

    # a receive given up while the broker holds it: its pop takes the next message
    gave_up = asyncio.ensure_future(client.receive(25, topic=given_up_topic,
                                                   polling_ms=20_000,
                                                   invisible_ms=INVISIBLE_MS))
    await asyncio.sleep(2)  # the broker holds it (Apache's broker cannot be looked at)
    gave_up.cancel()
    await asyncio.gather(gave_up, return_exceptions=True)
    await client.send(1, given_up_topic)
    sent = time.monotonic()
    back, took["given up back"] = await _until_received(client, given_up_topic, sent)
    seen["given up back"] = back.system_properties.delivery_attempt
    await telemetry.done_writing()
    return seen, took


async def long_polls(client: Client) -> tuple[dict[str, Any], dict[str, float]]:
    """Every await time, as the Python and the Java client ask, all at once (empty topic)."""
    topic = f"Awaits{time.time_ns() % 10**9:09d}"
    await client.create_topic(topic)
    await routed(client.stub, topic)
    telemetry = await client.settings(topic=topic, request_timeout_s=REQUEST_TIMEOUT_S)
    cases = [(style, wait) for style in ("python", "java") for wait in AWAITS_S]
    answers = await asyncio.gather(*(
        client.receive(wait + REQUEST_TIMEOUT_S, topic=topic,
                       polling_ms=wait * 1000 if style == "python" else None)
        for style, wait in cases))
    await telemetry.done_writing()
    seen = {f"{style} await {wait} s": (got.code, got.status.message if got.status else "")
            for (style, wait), got in zip(cases, answers, strict=True)}
    took = {f"{style} await {wait} s": got.seconds
            for (style, wait), got in zip(cases, answers, strict=True)}
    return seen, took


def _compare(ours: tuple[dict[str, Any], dict[str, float]],
             theirs: tuple[dict[str, Any], dict[str, float]]) -> None:
    print("ours", ours, "\ntheirs", theirs)
    assert ours[0] == theirs[0]
    assert ours[1].keys() == theirs[1].keys()
    for name, seconds in theirs[1].items():
        assert abs(ours[1][name] - seconds) < TOLERANCE_S, (name, ours[1][name], seconds)


async def _both(apache5: Apache5, tmp_path: Path, namesrv: NamesrvController,
                scenario: Any) -> None:
    async with grpc.aio.insecure_channel(apache5.grpc) as channel:
        theirs = await scenario(Client(service_pb2_grpc.MessagingServiceStub(channel),
                                       apache5.grpc, four_queues(apache5.broker)))
    async with (running_stack(tmp_path, namesrv) as stack,
                grpc.aio.insecure_channel(stack.endpoint) as channel):
        ours = await scenario(Client(service_pb2_grpc.MessagingServiceStub(channel),
                                     stack.endpoint, stack.create_topic, stack))
    _compare(ours, theirs)


async def test_redelivery_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                          namesrv: NamesrvController) -> None:
    await _both(apache5, tmp_path, namesrv, redelivery)


async def test_long_polls_at_every_await_time_as_apache_5_3_3(
        apache5: Apache5, tmp_path: Path, namesrv: NamesrvController) -> None:
    await _both(apache5, tmp_path, namesrv, long_polls)


def _words(message: str, tag: str) -> str:
    """A status message without the run's names or the Java class 5.3.3 starts it with."""
    return message.replace(tag, "*").removeprefix(
        "org.apache.rocketmq.proxy.common.ProxyException: ")


async def broadcast_groups(client: Client, broker: str
                           ) -> tuple[dict[str, Any], dict[str, float]]:
    """Groups made broadcast-enabled, broadcast-disabled and consume-disabled (4.x group
    settings): the settings a 5.x client is answered, and who of two clients of the group
    receives a message (5.x consumes in clusters whatever the group says)."""
    tag = f"{time.time_ns() % 10**9:09d}"
    topic = f"Broadcast{tag}"
    await client.create_topic(topic)
    await routed(client.stub, topic)
    seen: dict[str, Any] = {}
    remoting = RemotingClient()
    try:
        for name, config in (("broadcast", {"consumeBroadcastEnable": True}),
                             ("no broadcast", {"consumeBroadcastEnable": False}),
                             ("consume off", {"consumeEnable": False})):
            group = f"Bc{name.replace(' ', '')}{tag}"
            made = await call(remoting, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                              body=json.dumps({"groupName": group, **config}).encode())
            assert made.code == ResponseCode.SUCCESS, made.remark
            ids = [f"bc-{k}-{group}" for k in range(2)]
            streams = []
            for client_id in ids:
                settings = pb.Settings(
                    client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
                        group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                            topic=pb.Resource(name=topic),
                            expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
                settings.request_timeout.FromSeconds(3)
                stream = client.stub.Telemetry(metadata=headers(client_id))
                await stream.write(spb.TelemetryCommand(settings=settings))
                answer = await stream.read()
                sub = answer.settings.subscription
                seen[f"{name} settings"] = (answer.status.code, sub.fifo,
                                            answer.settings.backoff_policy.max_attempts)
                streams.append(stream)
            await client.send(1, topic)
            got = [await client.receive(8, topic=topic, group=group, client_id=client_id,
                                        polling_ms=5000) for client_id in ids]
            seen[f"{name} receives"] = [
                (g.code, _words(g.status.message if g.status and g.code != pb.OK else "", tag),
                 len(g.messages)) for g in got]
            for stream in streams:
                await stream.done_writing()
    finally:
        await remoting.close()
    return seen, {}


async def test_broadcast_groups_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                namesrv: NamesrvController) -> None:
    async with grpc.aio.insecure_channel(apache5.grpc) as channel:
        theirs = await broadcast_groups(
            Client(service_pb2_grpc.MessagingServiceStub(channel), apache5.grpc,
                   four_queues(apache5.broker)), apache5.broker)
    async with (running_stack(tmp_path, namesrv) as stack,
                grpc.aio.insecure_channel(stack.endpoint) as channel):
        ours = await broadcast_groups(
            Client(service_pb2_grpc.MessagingServiceStub(channel), stack.endpoint,
                   stack.create_topic, stack), stack.broker.addr)
    _compare(ours, theirs)
