"""ReceiveMessage and the calls on its receipts, answered as Apache 5.3.3 answers them: the
long-polling time and the deadline, invisible times, batch sizes, filters, system topics and
groups, and requests that do not parse (raw generated stubs, so each request is exactly the
one under test; tests/proxy/test_apache5_receive.py puts the same requests to 5.3.3).

Timings are only checked in order against the call's deadline and polling time, with room to
spare: an answer cannot come before its polling time (less the broker's 50 ms), and one after
the deadline fails the call with DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy.receive_checks import NOT_ENOUGH_TIME
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.clock import ManualClock
from tests.proxy.conftest import TEST_PROXY, Stack, running_stack

pytestmark = pytest.mark.timeout(120)

TOPIC = "Rules"
GROUP = "RuleGroup"
#: Short long polls so the tests take seconds: 5.3's rule with a 1 s minimum, a 2 s maximum.
#: A second kept back from each deadline (5.3.3's default keeps 100 ms): the test's client
#: shares this process's event loop with the proxy, and on a busy machine a turn of that loop
#: can take longer than 100 ms, which would make an answer in time look late.
RULES_PROXY = dataclasses.replace(
    TEST_PROXY, grpc_client_consumer_min_long_polling_timeout_millis=1000,
    grpc_client_consumer_max_long_polling_timeout_millis=2000,
    long_polling_reserve_time_in_millis=1000)
CLIENT = "rules-client-1"


def headers(client_id: str = CLIENT, version: str = "5.1.2") -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"),
            ("x-mq-client-version", version), ("x-mq-protocol", "GRPC_V2"))


@dataclasses.dataclass
class Answer:
    status: pb.Status | None
    messages: list[pb.Message]
    seconds: float
    error: grpc.StatusCode | None = None

    @property
    def code(self) -> int | grpc.StatusCode:
        if self.error is not None:
            return self.error
        assert self.status is not None
        return self.status.code


@dataclasses.dataclass
class Client:
    """Raw calls to one proxy (ours or, in the differential test, Apache's)."""

    stub: service_pb2_grpc.MessagingServiceStub
    endpoint: str
    create_topic: Callable[[str], Awaitable[None]]
    stack: Stack | None = None  # ours, to look at its broker

    @property
    def ours(self) -> Stack:
        assert self.stack is not None
        return self.stack

    async def settings(self, client_id: str = CLIENT, group: str = GROUP, topic: str = TOPIC,
                       request_timeout_s: int = 3
                       ) -> grpc.aio.StreamStreamCall[spb.TelemetryCommand,
                                                      spb.TelemetryCommand]:
        """A simple consumer's Telemetry settings (the stream stays open)."""
        settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name=topic),
                expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
        settings.request_timeout.FromSeconds(request_timeout_s)
        call = self.stub.Telemetry(metadata=headers(client_id))
        await call.write(spb.TelemetryCommand(settings=settings))
        answer = await call.read()
        assert answer.status.code == pb.OK, answer.status
        return call

    async def send(self, count: int, topic: str = TOPIC, **props: str) -> None:
        for n in range(count):
            msg = pb.Message(topic=pb.Resource(name=topic), body=b"rule", user_properties=props)
            msg.system_properties.message_id = f"01RULE{time.time_ns():020X}{n:06X}"
            answer = await self.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                                 metadata=headers(), timeout=10)
            assert answer.status.code == pb.OK, answer.status

    async def receive(self, deadline_s: float, *, polling_ms: int | None = 1000,
                      invisible_ms: int | None = 30_000, batch: int = 32,
                      topic: str = TOPIC, group: str = GROUP, client_id: str = CLIENT,
                      version: str = "5.1.2",
                      expression: pb.FilterExpression | None = None) -> Answer:
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), batch_size=batch,
            message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
            filter_expression=expression or pb.FilterExpression(type=pb.TAG, expression="*"))
        if invisible_ms is not None:
            req.invisible_duration.FromMilliseconds(invisible_ms)
        if polling_ms is not None:
            req.long_polling_timeout.FromMilliseconds(polling_ms)
        status: pb.Status | None = None
        messages: list[pb.Message] = []
        started = time.monotonic()
        try:
            async for resp in self.stub.ReceiveMessage(req, metadata=headers(client_id, version),
                                                       timeout=deadline_s):
                if resp.WhichOneof("content") == "status":
                    status = resp.status
                elif resp.WhichOneof("content") == "message":
                    messages.append(resp.message)
        except grpc.aio.AioRpcError as exc:
            return Answer(None, [], time.monotonic() - started, exc.code())
        return Answer(status, messages, time.monotonic() - started)


@contextlib.asynccontextmanager
async def rules_client(tmp_path: Path, namesrv: NamesrvController,
                       **broker_changes: Any) -> AsyncIterator[Client]:
    """A Client of a RULES_PROXY stack (`broker_changes` as for `running_stack`) with TOPIC,
    its simple consumer's settings sent."""
    async with running_stack(tmp_path, namesrv, RULES_PROXY, **broker_changes) as stack:
        await stack.create_topic(TOPIC)
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            c = Client(service_pb2_grpc.MessagingServiceStub(channel), stack.endpoint,
                       stack.create_topic, stack)
            telemetry = await c.settings()
            yield c
            await telemetry.done_writing()


@pytest.fixture
async def client(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Client]:
    async with rules_client(tmp_path, namesrv) as c:
        yield c


# ---------------------------------------------------------------------- polling and deadline

async def test_too_little_time_left_is_refused_at_once(client: Client) -> None:
    """Less than the minimum polling time left: refused before the queues are looked at."""
    await client.send(1)
    for polling in (0, None, 3000):
        got = await client.receive(0.8, polling_ms=polling)
        assert (got.code, got.status and got.status.message) == (pb.ILLEGAL_POLLING_TIME,
                                                                  NOT_ENOUGH_TIME)
    for version in ("5.0.2", ""):  # clients before 5.0.3 are told BAD_REQUEST
        assert (await client.receive(0.8, version=version)).code == pb.BAD_REQUEST
    assert len((await client.receive(5)).messages) == 1  # it was there all along


async def test_no_polling_time_polls_the_minimum(client: Client) -> None:
    got = await client.receive(5, polling_ms=0)
    assert got.code == pb.MESSAGE_NOT_FOUND
    assert got.seconds >= 0.9


async def test_polling_time_above_the_maximum_is_lowered(client: Client) -> None:
    got = await client.receive(10, polling_ms=60_000)
    assert got.code == pb.MESSAGE_NOT_FOUND  # not ILLEGAL_POLLING_TIME
    assert got.seconds >= 1.9


async def test_without_polling_time_it_is_the_time_left_less_half_the_request_timeout(
        client: Client) -> None:
    """What the Java client gets (it sends none): 6 s left, 8 s request timeout -> 2 s."""
    telemetry = await client.settings("rules-java-1", request_timeout_s=8)
    got = await client.receive(6, polling_ms=None, client_id="rules-java-1")
    await telemetry.done_writing()
    assert got.code == pb.MESSAGE_NOT_FOUND
    # Polled 2 s: polling to the deadline would answer at 5.9 s at the earliest, so the bound
    # between them leaves a loaded machine 3.5 s of slack (the exact rule: test_receive_checks).
    assert 1.9 <= got.seconds < 5.5


async def test_polling_up_to_the_deadline_answers_before_it(client: Client) -> None:
    got = await client.receive(2.5, polling_ms=2000)
    assert got.code == pb.MESSAGE_NOT_FOUND  # not DEADLINE_EXCEEDED
    assert got.seconds >= 1.0  # it polled up to the deadline less the reserve (1.5 s)


async def test_many_receives_in_flight_all_answer_before_their_deadline(client: Client) -> None:
    """16 consumers, 5 receives each in flight as the Java client makes them (no polling
    time: await 2 s + request timeout 3 s), on topics and groups made a moment before."""
    topics = [f"RulesLoad{k}" for k in range(4)]
    for topic in topics:
        await client.create_topic(topic)
    consumers = [(f"rules-load-{k}", f"RulesLoadGroup{k}", topics[k % 4]) for k in range(16)]
    streams = [await client.settings(cid, group, topic) for cid, group, topic in consumers]
    receives = [client.receive(5, polling_ms=None, client_id=cid, group=group, topic=topic)
                for cid, group, topic in consumers for _ in range(5)]
    sending = client.send(8, topics[0])
    answers, _ = await asyncio.gather(asyncio.gather(*receives), sending)
    for stream in streams:
        await stream.done_writing()
    assert {a.code for a in answers} <= {pb.OK, pb.MESSAGE_NOT_FOUND}  # no DEADLINE_EXCEEDED
    assert all(a.seconds >= 1.9 for a in answers if a.code == pb.MESSAGE_NOT_FOUND)
    for k in range(0, 16, 4):  # the groups of the topic sent to: each message once at most
        ids = [m.system_properties.message_id for a in answers[k * 5:k * 5 + 5]
               for m in a.messages]
        assert ids and len(ids) == len(set(ids))


async def test_a_broker_later_than_the_deadline_is_not_waited_for(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    """A broker whose clock stands still never ends its long poll: the proxy answers before
    the deadline all the same, and what the broker pops afterwards keeps the receive's 60 s
    invisible time, as on 5.3.3 (whose answer to a call already over fails at its status and
    nacks nothing)."""
    clock = ManualClock(int(time.time() * 1000))
    async with running_stack(tmp_path, namesrv, RULES_PROXY, clock=clock) as stack:
        await stack.create_topic(TOPIC)
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            c = Client(service_pb2_grpc.MessagingServiceStub(channel), stack.endpoint,
                       stack.create_topic, stack)
            telemetry = await c.settings()
            got = await c.receive(2.5, polling_ms=3000, invisible_ms=60_000)
            assert got.code == pb.MESSAGE_NOT_FOUND  # not DEADLINE_EXCEEDED
            await c.send(1)  # the poll still held pops it, too late for anyone
            state = stack.broker.state
            queues = range(state.topics.get(TOPIC).read_queue_nums)  # type: ignore[union-attr]
            for _ in range(1000):
                if sum(state.pop.inflight(TOPIC, GROUP, q) for q in queues):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the held poll never popped the message")
            revive = state.pop.revive
            for _ in range(40):  # 20 s of the broker's time: not due (no nack to 1 s)
                clock.advance(500)
                assert not revive.revive_due()
            clock.advance(41_000)  # past its 60 s
            assert revive.revive_due()
            await telemetry.done_writing()


# ---------------------------------------------------------------------- bounds

async def test_invisible_time_bounds(client: Client) -> None:
    for invisible in (None, 0, 9_999):
        got = await client.receive(5, invisible_ms=invisible)
        assert (got.code, got.status and got.status.message) == (
            pb.ILLEGAL_INVISIBLE_TIME, "the invisibleTime is too small. min is 10000")
    got = await client.receive(5, invisible_ms=12 * 3600_000 + 1)
    assert (got.code, got.status and got.status.message) == (
        pb.ILLEGAL_INVISIBLE_TIME, "the invisibleTime is too large. max is 43200000")
    await client.send(2)
    for invisible in (10_000, 12 * 3600_000):
        assert len((await client.receive(5, invisible_ms=invisible, batch=1)).messages) == 1


async def test_batch_sizes(client: Client) -> None:
    await client.send(100)
    for batch in (33, 64, 1_000_000):  # lowered to 32
        got = await client.receive(5, batch=batch)
        assert (got.code, len(got.messages)) == (pb.OK, 32)
    got = await client.receive(5, batch=0)  # nothing asked: nothing found, after polling
    assert (got.code, got.messages) == (pb.MESSAGE_NOT_FOUND, [])
    assert got.seconds >= 0.9
    got = await client.receive(5, batch=-1)
    assert got.code == pb.INTERNAL_SERVER_ERROR
    assert len((await client.receive(5)).messages) == 4  # the rest is still there


async def test_filters(client: Client) -> None:
    got = await client.receive(5, expression=pb.FilterExpression(type=pb.SQL, expression=""))
    assert (got.code, got.status and got.status.message) == (
        pb.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
    got = await client.receive(5, expression=pb.FilterExpression(type=pb.TAG, expression="||"))
    assert (got.code, got.status and got.status.message) == (
        pb.ILLEGAL_FILTER_EXPRESSION, "subString split error")
    # SQL92 over POP whatever enablePropertyFilter says (off here, its default)
    assert not client.ours.broker.state.config.enable_property_filter
    await client.send(1, a="1")
    await client.send(1, a="2")
    got = await client.receive(5, expression=pb.FilterExpression(type=pb.SQL,
                                                                 expression="a > 1"))
    assert [m.user_properties["a"] for m in got.messages] == ["2"]


# ---------------------------------------------------------------------- system topics

async def test_system_topics_and_groups_are_refused_with_a_real_receipt(client: Client) -> None:
    await client.send(1)
    (msg,) = (await client.receive(5)).messages
    entry = spb.AckMessageEntry(message_id=msg.system_properties.message_id,
                                receipt_handle=msg.system_properties.receipt_handle)
    for topic in ("SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_anything"):
        ack = await client.stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=topic), entries=[entry]),
            metadata=headers(), timeout=10)
        assert (ack.status.code, ack.status.message, list(ack.entries)) == (
            pb.ILLEGAL_TOPIC, "cannot access system topic", [])
        change = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=topic),
            receipt_handle=entry.receipt_handle, message_id=entry.message_id)
        change.invisible_duration.FromSeconds(20)
        answer = await client.stub.ChangeInvisibleDuration(change, metadata=headers(),
                                                           timeout=10)
        assert (answer.status.code, answer.status.message) == (
            pb.ILLEGAL_TOPIC, "cannot access system topic")
        dlq = await client.stub.ForwardMessageToDeadLetterQueue(
            spb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name=GROUP), topic=pb.Resource(name=topic),
                receipt_handle=entry.receipt_handle, message_id=entry.message_id),
            metadata=headers(), timeout=10)
        assert dlq.status.code == pb.ILLEGAL_TOPIC
        assert (await client.receive(5, topic=topic)).code == pb.ILLEGAL_TOPIC
    ack = await client.stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name="CID_RMQ_SYS_X"), topic=pb.Resource(name=TOPIC),
        entries=[entry]), metadata=headers(), timeout=10)
    assert (ack.status.code, ack.status.message) == (pb.ILLEGAL_CONSUMER_GROUP,
                                                      "cannot use system consumer group")
    ack = await client.stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), entries=[entry]),
        metadata=headers(), timeout=10)
    assert ack.status.code == pb.OK  # the receipt was good all along


# ---------------------------------------------------------------------- undecodable requests

METHODS = {m.name: (m.client_streaming, m.server_streaming)
           for m in spb.DESCRIPTOR.services_by_name["MessagingService"].methods}


async def undecodable_answers(endpoint: str) -> dict[str, tuple[str, str]]:
    """Each method's answer to request bytes that do not parse: (gRPC code, details)."""
    channel = grpc.aio.insecure_channel(endpoint)
    seen = {}
    try:
        for name, (client_streams, server_streams) in METHODS.items():
            path = f"/apache.rocketmq.v2.MessagingService/{name}"
            # a field number 0 (a bad tag); a string field cut short
            for n, payload in enumerate((b"\xff\xff\xff\xff", b"\x0a\x05ab")):
                try:
                    if client_streams:
                        call = channel.stream_stream(path)(metadata=headers(), timeout=10)
                        await call.write(payload)
                        await call.done_writing()
                        _ = [r async for r in call]
                    elif server_streams:
                        _ = [r async for r in channel.unary_stream(path)(
                            payload, metadata=headers(), timeout=10)]
                    else:
                        await channel.unary_unary(path)(payload, metadata=headers(), timeout=10)
                    seen[f"{name} {n}"] = ("answered", "")
                except grpc.aio.AioRpcError as exc:
                    seen[f"{name} {n}"] = (exc.code().name, exc.details() or "")
    finally:
        await channel.close()
    return seen


async def test_requests_that_do_not_parse_are_unknown_without_text(client: Client) -> None:
    """grpc-java's answer (Apache's proxy): UNKNOWN, no description, for every method."""
    seen = await undecodable_answers(client.endpoint)
    assert len(seen) == 2 * len(METHODS)
    assert set(seen.values()) == {("UNKNOWN", "")}
