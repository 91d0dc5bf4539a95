"""A broker's requests to a gRPC consumer (consumerStatus, consumeMessageDirectly) relayed
over Telemetry: answered by a client that answers as the Go client does, timed out for one
that does not (the official Python client), refused at once for one without a stream."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ServerSystemError, SystemBusyError
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.admin import CMResult
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from mqadmin.operations import consumer as ops
from mqadmin.operations.messages.ids import StoredMessage, find_by_id
from mqadmin.operations.messages.redeliver import consume_directly
from tests.conftest import addr_of
from tests.proxy.conftest import TEST_PROXY, Stack, in_thread, running_stack, stored
from tests.proxy.official import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

GROUP = "RelayGroup"
TOPIC = "RelayTopic"
TIMEOUT = 10
STACK_TEXT = "goroutine 1 [running]:\nmain.main()\n\t/app/main.go:12 +0x1d\n"
#: A proxy that gives a silent client one second.
QUICK_PROXY = dataclasses.replace(TEST_PROXY, grpc_proxy_relay_request_timeout_in_seconds=1)


def headers(client_id: str) -> tuple[tuple[str, str], ...]:
    """The Go client's call headers."""
    return (("x-mq-client-id", client_id), ("x-mq-language", "GO"),
            ("x-mq-client-version", "5.1.4"), ("x-mq-protocol", "v2"))


class RawConsumer:
    """A push consumer over the generated stubs that answers the proxy's commands on its
    Telemetry stream as the Go client does (`answer=False`: it ignores them)."""

    def __init__(self, stub: service_pb2_grpc.MessagingServiceStub, client_id: str, *,
                 answer: bool = True, verify_code: int = pb.OK, stack_code: int = pb.OK
                 ) -> None:
        self.stub = stub
        self.client_id = client_id
        self.answer = answer
        self.verify_code = verify_code
        self.stack_code = stack_code
        self.received: list[spb.TelemetryCommand] = []
        self.got_command = asyncio.Event()
        self.call: grpc.aio.StreamStreamCall[spb.TelemetryCommand, spb.TelemetryCommand] | None
        self.call = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.call = self.stub.Telemetry(metadata=headers(self.client_id), timeout=60)
        settings = pb.Settings(
            client_type=pb.PUSH_CONSUMER, user_agent=pb.UA(language=pb.GOLANG),
            subscription=pb.Subscription(
                group=pb.Resource(name=GROUP),
                subscriptions=[pb.SubscriptionEntry(
                    topic=pb.Resource(name=TOPIC),
                    expression=pb.FilterExpression(type=pb.TAG, expression="TagA"))]))
        await self.call.write(spb.TelemetryCommand(settings=settings))
        first = await self.call.read()
        assert isinstance(first, spb.TelemetryCommand) and first.status.code == pb.OK
        self._task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        assert self.call is not None
        while isinstance(command := await self.call.read(), spb.TelemetryCommand):
            self.received.append(command)
            self.got_command.set()
            if not self.answer:
                continue
            kind = command.WhichOneof("command")
            if kind == "print_thread_stack_trace_command":
                await self.call.write(spb.TelemetryCommand(
                    status=pb.Status(code=self.stack_code),  # type: ignore[arg-type]
                    thread_stack_trace=spb.ThreadStackTrace(
                        nonce=command.print_thread_stack_trace_command.nonce,
                        thread_stack_trace=STACK_TEXT)))
            elif kind == "verify_message_command":
                await self.call.write(spb.TelemetryCommand(
                    status=pb.Status(code=self.verify_code),  # type: ignore[arg-type]
                    verify_message_result=spb.VerifyMessageResult(
                        nonce=command.verify_message_command.nonce)))

    async def close(self) -> None:
        """End the stream and wait until the proxy has ended its side."""
        if self.call is not None and self._task is not None:
            await self.call.done_writing()
            await self._task
            self._task = None


@contextlib.asynccontextmanager
async def consumer(stack: Stack, client_id: str, **options: object
                   ) -> AsyncIterator[RawConsumer]:
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        raw = RawConsumer(service_pb2_grpc.MessagingServiceStub(channel), client_id,
                          **options)  # type: ignore[arg-type]
        await raw.start()
        try:
            yield raw
        finally:
            await raw.close()


@contextlib.asynccontextmanager
async def operator(namesrv: NamesrvController) -> AsyncIterator[MQAdmin]:
    async with MQAdmin(addr_of(namesrv)) as admin:
        yield admin


async def stored_message(stack: Stack, admin: MQAdmin) -> StoredMessage:
    """A message of TOPIC sent over gRPC, as mqadmin finds it by its offset message id."""
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"again")
        msg.system_properties.message_id = "01" + "AB" * 16
        msg.system_properties.tag = "TagA"
        sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                      metadata=headers("relay-producer"), timeout=TIMEOUT)
    assert sent.status.code == pb.OK
    record = await stored(stack, TOPIC, sent.entries[0].message_id)
    (found,) = await find_by_id(admin, record.offset_msg_id)
    return found


@pytest.fixture
async def quick_stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, QUICK_PROXY) as s:
        await s.create_topic(TOPIC)
        yield s


# ---------------------------------------------------------------------- a client that answers


async def test_consumer_status_with_jstack_shows_the_clients_stack(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "go-client-1") as raw, operator(namesrv) as admin:
        rows, info = await ops.client_status(admin, GROUP, "go-client-1", jstack=True)
        assert info.jstack == STACK_TEXT
        (asked,) = raw.received
        assert asked.print_thread_stack_trace_command.nonce
        assert rows == []  # a 5.x consumer holds no queues
        assert info.properties["consumerGroup"] == GROUP
        assert info.properties["clientType"] == "PUSH_CONSUMER"
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info.properties["PROP_CLIENT_VERSION"] == "V5_1_4"
        assert info.properties["language"] == "GO"
        assert info.properties["protocol"] == "gRPC"
        assert [(s.topic, s.sub_string) for s in info.subscription_set] == [(TOPIC, "TagA")]
        # Nothing waits any more.
        session = stack.proxy.core.sessions.get("go-client-1")
        assert session is not None and len(session.pending) == 0


async def test_consumer_status_without_jstack_answers_at_once_from_the_settings(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "go-client-2", answer=False) as raw, operator(namesrv) as admin:
        clients = await ops.read_clients(admin, GROUP)
        rows, same = ops.status_rows(clients)
        assert same
        assert rows[0]["clientId"] == "go-client-2"
        assert rows[0]["subscriptions"] == f"{TOPIC}:TagA"
        assert rows[0]["error"] is None
        assert raw.received == []  # the client was not asked anything


@pytest.mark.parametrize("code, result, remark", [
    (pb.OK, CMResult.CR_SUCCESS, "from gRPC client"),
    (pb.FAILED_TO_CONSUME_MESSAGE, CMResult.CR_LATER, "from gRPC client: FAILED_TO_CONSUME"),
    (pb.MESSAGE_CORRUPTED, CMResult.CR_RETURN_NULL, "from gRPC client: MESSAGE_CORRUPTED"),
    (pb.NOT_IMPLEMENTED, None, "from gRPC client: NOT_IMPLEMENTED"),  # the Go client's answer
])
async def test_consume_message_directly_relays_the_message_and_maps_the_status(
        stack: Stack, namesrv: NamesrvController, code: int, result: CMResult | None,
        remark: str) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "go-client-3", verify_code=code) as raw, \
            operator(namesrv) as admin:
        found = await stored_message(stack, admin)
        direct = await consume_directly(admin, GROUP, "go-client-3", found)
        assert direct.result.consume_result is result
        assert direct.result.remark is not None and direct.result.remark.startswith(remark)
        assert (direct.result.order, direct.result.auto_commit) == (False, True)
        (asked,) = raw.received
        message = asked.verify_message_command.message
        assert asked.verify_message_command.nonce
        assert (message.topic.name, message.body) == (TOPIC, b"again")
        assert message.system_properties.tag == "TagA"
        assert message.system_properties.message_id == "01" + "AB" * 16


async def test_a_stack_answer_that_is_not_ok_is_an_error_naming_its_status(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "go-client-4", stack_code=pb.NOT_IMPLEMENTED), \
            operator(namesrv) as admin:
        with pytest.raises(ServerSystemError, match="answered the PrintThreadStackTraceCommand "
                                                    "with NOT_IMPLEMENTED"):
            await ops.client_status(admin, GROUP, "go-client-4", jstack=True)


# ---------------------------------------------------------------------- clients that do not


async def test_a_silent_client_is_answered_call_remote_timeout_before_the_broker_gives_up(
        quick_stack: Stack, namesrv: NamesrvController) -> None:
    async with consumer(quick_stack, "silent-1", answer=False) as raw, \
            operator(namesrv) as admin:
        found = await stored_message(quick_stack, admin)
        # both asked at once (each waits out the proxy's 1 s), the stack trace first
        started = time.monotonic()
        status = asyncio.create_task(ops.client_status(admin, GROUP, "silent-1", jstack=True))
        await raw.got_command.wait()
        direct = asyncio.create_task(consume_directly(admin, GROUP, "silent-1", found))
        with pytest.raises(SystemBusyError, match="call remote timeout") as info:
            await status
        assert "silent-1" in str(info.value) and "PrintThreadStackTraceCommand" in str(info.value)
        assert time.monotonic() - started < 9  # the broker waits 10 s for a client
        with pytest.raises(SystemBusyError, match="VerifyMessageCommand"):
            await direct
        assert [c.WhichOneof("command") for c in raw.received] == [
            "print_thread_stack_trace_command", "verify_message_command"]
        session = quick_stack.proxy.core.sessions.get("silent-1")
        assert session is not None and len(session.pending) == 0


async def test_a_client_without_telemetry_stream_is_refused_at_once(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "gone-1") as raw, operator(namesrv) as admin:
        await raw.close()  # the stream ends; the client stays registered with the broker
        session = stack.proxy.core.sessions.get("gone-1")
        assert session is not None and session.outbox is None
        with pytest.raises(ServerSystemError, match="no Telemetry stream"):
            await ops.client_status(admin, GROUP, "gone-1", jstack=True)
        found = await stored_message(stack, admin)
        with pytest.raises(ServerSystemError, match="no Telemetry stream"):
            await consume_directly(admin, GROUP, "gone-1", found)
        assert raw.received == []


async def test_a_stream_that_ends_while_asked_is_answered_at_once(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic(TOPIC)
    async with consumer(stack, "leaving-1", answer=False) as raw, operator(namesrv) as admin:
        asked = asyncio.create_task(ops.client_status(admin, GROUP, "leaving-1", jstack=True))
        await raw.got_command.wait()
        await raw.close()
        with pytest.raises(ServerSystemError, match="closed before it answered"):
            await asked
        session = stack.proxy.core.sessions.get("leaving-1")
        assert session is not None and len(session.pending) == 0


async def test_the_official_python_client_ignores_the_commands_and_the_operator_is_told(
        quick_stack: Stack, namesrv: NamesrvController) -> None:
    simple = SimpleConsumer(ClientConfiguration(quick_stack.endpoint, Credentials()), GROUP,
                            {TOPIC: FilterExpression("TagA")})
    await in_thread(simple.startup)
    try:
        assert await in_thread(simple._init_settings_event.wait, 10)
        async with operator(namesrv) as admin:
            clients = await ops.read_clients(admin, GROUP)
            rows, _ = ops.status_rows(clients)
            assert [(r["clientId"], r["error"]) for r in rows] == [(simple.client_id, None)]
            info = clients.running[simple.client_id]
            assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
            assert info.properties["language"] == "PYTHON"
            found = await stored_message(quick_stack, admin)
            # both asked at once: each waits out the proxy's 1 s
            asked = await asyncio.gather(
                ops.client_status(admin, GROUP, simple.client_id, jstack=True),
                consume_directly(admin, GROUP, simple.client_id, found),
                return_exceptions=True)
            for answer in asked:
                assert isinstance(answer, SystemBusyError), answer
                assert "call remote timeout" in str(answer)
        # The client lives on: its stream still serves the proxy's commands.
        session = quick_stack.proxy.core.sessions.get(simple.client_id)
        assert session is not None and session.outbox is not None
        assert len(session.pending) == 0
    finally:
        await in_thread(simple.shutdown)
