"""A broker's requests to a gRPC client, relayed as Telemetry commands (5.3 `GrpcClientChannel`).

How this works: a broker sends GET_CONSUMER_RUNNING_INFO (`mqadmin consumerStatus`) and
CONSUME_MESSAGE_DIRECTLY (`consumeMessageDirectly`) on the connection the proxy registered
the client with (`sessions.py`).  The proxy turns them into the client's commands, as 5.3:

    GET_CONSUMER_RUNNING_INFO, jstackEnable -> PrintThreadStackTraceCommand{nonce}
        client: ThreadStackTrace{nonce, text} + status -> ConsumerRunningInfo, jstack = text
    CONSUME_MESSAGE_DIRECTLY -> VerifyMessageCommand{nonce, message}
        client: VerifyMessageResult{nonce} + status -> ConsumeMessageDirectlyResult

Each command waits in the session's `PendingCalls` under a random nonce until the client's
answer on its Telemetry stream (`clients.py`) completes it.  The broker always gets an
answer before it gives up (it waits 10 s for a client, Apache's and ours): a client that
does not answer (the Python 5.x client ignores these commands) is answered SYSTEM_BUSY "call
remote timeout" after grpcProxyRelayRequestTimeoutInSeconds (5.3's code and remark; at most
`MAX_WAIT_S`), a client whose stream closes meanwhile at once, and one with no Telemetry
stream at once too (5.3 writes to no stream and lets the call time out).  The Node.js client
answers a stack request with "mock stack", and a verification with a VerifyMessageCommand
(its bug: not a VerifyMessageResult) of status NOT_IMPLEMENTED, which is taken as its result
(5.3 ignores it and times out).  Without jstackEnable the running info is answered at once
from what the proxy knows of the client (its settings: group, type, subscriptions), where
5.3 sends nothing and leaves the broker to time out (5.3.3 does so with jstackEnable too:
its broker passes the request on without the decoded header its proxy reads the flag from).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.protocol import fastjson
from engine.protocol.body.admin import CMResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo
from engine.protocol.body.heartbeat import GRPC_PROTOCOL, SubscriptionData
from engine.protocol.codes import LanguageCode, RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from engine.protocol.message import decode_record
from engine.protocol.version import version_desc
from engine.protocol.wire import from_ext, to_json
from engine.proxy.messages import to_proto
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.remoting.router import RequestContext, Router

if TYPE_CHECKING:
    from engine.proxy.sessions import ClientSession

#: Brokers wait this long for a client (Apache's `Broker2Client.callClient`, ours); the proxy
#: answers a second before.
BROKER_WAIT_S = 10.0
MAX_WAIT_S = BROKER_WAIT_S - 1.0
#: 5.3's answer to a client that did not answer in time (`GrpcChannelManager`).
TIMEOUT_REMARK = "call remote timeout"
#: 5.3's remark on every ConsumeMessageDirectlyResult of a gRPC client.
VERIFY_REMARK = "from gRPC client"

#: A VerifyMessageResult's status as the consume result (5.3 `ClientActivity`); any other
#: status (NOT_IMPLEMENTED from the Go client and Java's simple consumer) leaves it empty.
CONSUME_RESULTS = {
    pb.OK: CMResult.CR_SUCCESS,
    pb.FAILED_TO_CONSUME_MESSAGE: CMResult.CR_LATER,
    pb.MESSAGE_CORRUPTED: CMResult.CR_RETURN_NULL,
}

router = Router()
Ctx = RequestContext["ClientSession"]


class StreamClosed(Exception):
    """The Telemetry stream a command went out on ended before the client answered it."""


class RelayFailed(Exception):
    """The broker's request cannot be relayed or was not answered: what to answer instead."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclasses.dataclass(frozen=True, slots=True)
class Pending:
    future: asyncio.Future[spb.TelemetryCommand]
    outbox: object  # the queue of the stream the command went out on


class PendingCalls:
    """A client's commands awaiting its answer, by nonce (5.3 keeps one such map per proxy;
    nonces here are random, so an answer a client sends to every proxy it knows completes
    only the command it answers)."""

    def __init__(self) -> None:
        self._calls: dict[str, Pending] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def open(self, outbox: object) -> tuple[str, asyncio.Future[spb.TelemetryCommand]]:
        nonce = secrets.token_hex(8)
        future: asyncio.Future[spb.TelemetryCommand] = (
            asyncio.get_running_loop().create_future())
        self._calls[nonce] = Pending(future, outbox)
        return nonce, future

    def drop(self, nonce: str) -> None:
        self._calls.pop(nonce, None)

    def answer(self, nonce: str, command: spb.TelemetryCommand) -> bool:
        """Complete the command `nonce` with the client's answer; False when none waits
        (answered already, timed out, or another proxy's)."""
        pending = self._calls.pop(nonce, None)
        if pending is None or pending.future.done():
            return False
        pending.future.set_result(command)
        return True

    def stream_closed(self, outbox: object) -> None:
        """Fail at once the commands that went out on a stream that has ended."""
        for nonce, pending in list(self._calls.items()):
            if pending.outbox is outbox:
                del self._calls[nonce]
                if not pending.future.done():
                    pending.future.set_exception(StreamClosed())


def answer(session: ClientSession, command: spb.TelemetryCommand) -> bool:
    """A ThreadStackTrace or VerifyMessageResult from the client's Telemetry stream."""
    kind = command.WhichOneof("command")
    if kind == "thread_stack_trace":
        return session.pending.answer(command.thread_stack_trace.nonce, command)
    if kind == "verify_message_result":
        return session.pending.answer(command.verify_message_result.nonce, command)
    if kind == "verify_message_command":  # the Node.js client answers in the command's type
        return session.pending.answer(command.verify_message_command.nonce, command)
    return False


async def ask(session: ClientSession, what: str,
              build: Callable[[str], spb.TelemetryCommand]) -> spb.TelemetryCommand:
    """Send the client the command `build(nonce)` makes and wait for its answer.

    Raises:
        RelayFailed: no Telemetry stream, the stream closed, or no answer in time.
    """
    outbox = session.outbox
    if outbox is None:
        raise RelayFailed(ResponseCode.SYSTEM_ERROR, (
            f"the gRPC client {session.client_id} has no Telemetry stream open to the proxy; "
            f"cannot send it a {what}"))
    wait = min(float(session.relay_timeout_s), MAX_WAIT_S)
    nonce, future = session.pending.open(outbox)
    try:
        if not session.push(build(nonce)):
            raise RelayFailed(ResponseCode.SYSTEM_BUSY, (
                f"the Telemetry stream of gRPC client {session.client_id} is not taking "
                f"commands; cannot send it a {what}"))
        return await asyncio.wait_for(future, wait)
    except TimeoutError:
        raise RelayFailed(ResponseCode.SYSTEM_BUSY, (
            f"{TIMEOUT_REMARK}: the gRPC client {session.client_id} did not answer the "
            f"{what} within {wait:g} s (not every 5.x client answers it)")) from None
    except StreamClosed:
        raise RelayFailed(ResponseCode.SYSTEM_ERROR, (
            f"the Telemetry stream of gRPC client {session.client_id} closed before it "
            f"answered the {what}")) from None
    finally:
        session.pending.drop(nonce)


def _code_name(status: pb.Status) -> str:
    try:
        return str(pb.Code.Name(status.code))
    except ValueError:
        return str(status.code)


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return str(code)


def running_info(session: ClientSession) -> ConsumerRunningInfo:
    """What the proxy knows of a gRPC consumer (5.3 sends the stack alone): its group, type,
    version, language, address and subscriptions; no queues (a 5.x consumer holds none)."""
    props = {"PROP_CLIENT_VERSION": version_desc(session.version),
             "PROP_CONSUMER_START_TIMESTAMP": str(session.started_ms),
             "language": _language(session.language), "protocol": GRPC_PROTOCOL,
             "clientAddr": session.remote_addr}
    subscriptions: list[SubscriptionData] = []
    settings = session.settings
    sub = settings.subscription if settings is not None else pb.Subscription()
    for data in session.heartbeat_data().consumer_data_set:  # one: a 5.x consumer's group
        props |= {"consumerGroup": data.group_name,
                  "clientType": pb.ClientType.Name(session.client_type),
                  "messageModel": data.message_model.name,
                  "PROP_CONSUME_TYPE": data.consume_type.name,
                  "PROP_CONSUME_ORDERLY": str(sub.fifo).lower(),
                  "receiveBatchSize": str(sub.receive_batch_size),
                  "longPollingTimeoutMillis": str(sub.long_polling_timeout.ToMilliseconds())}
        subscriptions = sorted(data.subscription_data_set, key=lambda s: s.topic)
    return ConsumerRunningInfo(props, subscriptions)


@router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
async def get_consumer_running_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """The client's running info; with jstackEnable, its thread stacks asked over Telemetry."""
    session = ctx.state
    header = from_ext(GetConsumerRunningInfoRequestHeader, cmd.ext_fields)
    info = running_info(session)
    if header.jstack_enable:
        what = "PrintThreadStackTraceCommand"
        try:
            reply = await ask(session, what, lambda nonce: spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)))
        except RelayFailed as exc:
            return cmd.response(exc.code, exc.remark)
        if reply.status.code != pb.OK:
            return cmd.response(ResponseCode.SYSTEM_ERROR, (
                f"the gRPC client {session.client_id} answered the {what} with "
                f"{_code_name(reply.status)} {reply.status.message}".rstrip()))
        info = dataclasses.replace(info, jstack=reply.thread_stack_trace.thread_stack_trace)
    return cmd.response(body=fastjson.dumpb(to_json(info)))


@router.handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
async def consume_message_directly(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """The stored message to the client as a VerifyMessageCommand; its status as the result."""
    session = ctx.state
    try:
        header = from_ext(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
        record = decode_record(cmd.body or b"")
    except ProtocolError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"CONSUME_MESSAGE_DIRECTLY does not decode: {exc}")
    message = to_proto(record, offset_msg_id=header.msg_id or "")
    started = time.monotonic()
    try:
        reply = await ask(session, "VerifyMessageCommand", lambda nonce: spb.TelemetryCommand(
            verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=message)))
    except RelayFailed as exc:
        return cmd.response(exc.code, exc.remark)
    status = reply.status
    remark = VERIFY_REMARK
    if status.code != pb.OK:
        remark = f"{VERIFY_REMARK}: {_code_name(status)} {status.message}".rstrip()
    result = ConsumeMessageDirectlyResult(
        order=False, auto_commit=True, consume_result=CONSUME_RESULTS.get(status.code),
        remark=remark, spent_time_mills=int((time.monotonic() - started) * 1000))
    return cmd.response(body=fastjson.dumpb(to_json(result)))
