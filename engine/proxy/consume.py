"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over POP.

How this works (5.3 `ReceiveMessageActivity`, `AckMessageActivity`, `ChangeInvisibleDuration
Activity`, `ForwardMessageToDLQActivity`): a receive is one POP_MESSAGE (200050) to a broker
of the topic (the one the request names, else the brokers in turn) for every queue (-1),
held by the broker up to the long-polling time, once the request passed 5.3.3's checks in
its order (`receive_checks`: polling time against the deadline, topic, group, invisible
time, filter; then the queue and the batch size).  The receive is answered before its
deadline even if the broker is late; what a late broker pops (or pops for a client that gave
up) stays invisible for the receive's invisible time, as on 5.3.3, whose stream then fails at
its first write, the status, and nacks nothing.  Messages whose own write fails after the
status are nacked (visible again in NACK_INVISIBLE_TIME_MS), as 5.3.3 nacks them.  The answer's
offset infos give each message its receipt, as 5.3's client does (`engine.protocol.receipt`);
the client's receipt handle is that receipt plus the message's commit-log offset (5.3
`ReceiptHandle`).  A popped message already delivered the client's maxAttempts times (its
settings' retry policy) goes to the group's DLQ instead of to the client (5.3
`PopMessageResultFilterImpl`).  The stream answers a status first (OK, MESSAGE_NOT_FOUND or
TOO_MANY_REQUESTS for a full broker), then one response per message.  A receipt handle past
its invisible time is refused before any broker is asked (INVALID_RECEIPT_HANDLE, as 5.3).
Acks go as ACK_MESSAGE, one per receipt, those of one request sent at once so the broker
handles them together; with enableBatchAck, as one BATCH_ACK_MESSAGE per broker whose answer
is every entry's (5.3 `batchAckMessage`).  A change of invisibility goes as
CHANGE_MESSAGE_INVISIBLETIME whose answer makes the new receipt, and a DLQ forward as
CONSUMER_SEND_MSG_BACK with delay level -1, then an ack of the receipt, as 5.3 does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from engine.client.core.errors import ClientError, raise_for
from engine.client.core.pop_calls import batch_ack_body
from engine.client.core.pop_codec import (
    ack_request,
    change_invisible_request,
    pop_header,
    pop_request,
)
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.header.pop import (
    INIT_MODE_MAX,
    ChangeInvisibleTimeResponseHeader,
    PopMessageResponseHeader,
)
from engine.protocol.message import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK, decode_records
from engine.protocol.perm import is_readable
from engine.protocol.receipt import ExtraInfo, ReceiptError, normal_topic, popped
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.proxy import receive_checks as checks
from engine.proxy.brokers import broker_failure
from engine.proxy.caller import CallContext
from engine.proxy.clients import validate_group, validate_topic
from engine.proxy.core import ProxyCore
from engine.proxy.messages import to_proto
from engine.proxy.sessions import ClientSession
from engine.proxy.status import OK_STATUS, ProxyError, code_of_remoting, status
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb

#: 5.3 `ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME`: a message the stream could
#: not deliver becomes visible again after this long.
NACK_INVISIBLE_TIME_MS = 1000
DLQ_DELAY_LEVEL = -1


def _ms(duration: object) -> int:
    return int(duration.ToMilliseconds())  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- receipt handles

def receipt_handle(extra_info: str, commit_log_offset: int) -> str:
    return f"{extra_info} {commit_log_offset}"


def parse_handle(handle: str, now_ms: int | None = None) -> ExtraInfo:
    """The POP receipt inside a 5.x receipt handle; with `now_ms`, one not yet expired.

    Raises:
        ProxyError: INVALID_RECEIPT_HANDLE.
    """
    try:
        info = ExtraInfo.parse(handle)
    except ReceiptError as exc:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, f"receipt handle is not valid: {exc}") \
            from None
    if info.queue_offset is None:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle has no queue offset")
    if now_ms is not None and info.revive_time <= now_ms:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return info


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------- receive

async def _broker(core: ProxyCore, topic: str, wanted: str) -> tuple[str, str]:
    route = await core.gateway.route(topic)
    readable = sorted(qd.broker_name for qd in route.queue_datas
                      if is_readable(qd.perm) and qd.read_queue_nums > 0)
    names = [wanted] if wanted and wanted in readable else readable
    for offset in range(len(names)):
        name = names[(core.next_turn("\x00receive\x00" + topic) + offset) % len(names)]
        addr = core.gateway.master_addr(route, name)
        if addr:
            return name, addr
    raise ProxyError(pb.FORBIDDEN, "no readable queue")


def _messages(resp: RemotingCommand, broker: str, group: str, topic: str,
              fifo: bool) -> list[pb.Message]:
    header = from_ext(PopMessageResponseHeader, resp.ext_fields)
    records = decode_records(resp.body or b"")
    all_props = [r.properties() for r in records]
    receipts = popped(header, broker,
                      ((r.topic, r.queue_id, r.queue_offset, p.get(PROPERTY_POP_CK))
                       for r, p in zip(records, all_props, strict=True)), order=fifo)
    out: list[pb.Message] = []
    for record, props, got in zip(records, all_props, receipts, strict=True):
        extra = got.receipt.encode()
        props[PROPERTY_POP_CK] = extra
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(header.pop_time))
        attempt = record.reconsume_times + 1
        if fifo and got.pop_count is not None:
            attempt = got.pop_count + 1
        out.append(to_proto(record, topic=normal_topic(record.topic, group), props=props,
                            receipt_handle=receipt_handle(extra, record.physical_offset),
                            delivery_attempt=attempt))
    return out


def _deadline(context: grpc.aio.ServicerContext[object, object]) -> float | None:
    """The call's deadline on the event loop's clock; None when the client set none."""
    remaining = context.time_remaining()
    return None if remaining is None else asyncio.get_running_loop().time() + remaining


def _left_ms(deadline: float) -> int:
    return int((deadline - asyncio.get_running_loop().time()) * 1000)


async def receive(core: ProxyCore, ctx: CallContext, session: ClientSession,
                  req: spb.ReceiveMessageRequest,
                  context: grpc.aio.ServicerContext[object, object]
                  ) -> AsyncIterator[spb.ReceiveMessageResponse]:
    """The responses of one ReceiveMessage (a status first, then the messages), checked in
    5.3.3's order: polling time, topic, group, invisible time, filter, queue, batch."""
    cfg = core.config
    deadline = _deadline(context)
    requested = _ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") else None
    settings = session.settings
    if deadline is None:  # no deadline to keep (5.3.3 fails such a call, see docs/proxy.md)
        polling = checks.polling_ms(cfg, requested, 1 << 62, 0, ctx.client_version)
    else:
        request_timeout = _ms(settings.request_timeout) if settings is not None else 0
        polling = checks.polling_ms(cfg, requested, _left_ms(deadline), request_timeout,
                                    ctx.client_version)
    topic = validate_topic(req.message_queue.topic)
    group = validate_group(req.group)
    invisible = checks.invisible_ms(cfg, req.auto_renew, _ms(req.invisible_duration))
    sub = checks.receive_filter(topic, req.filter_expression)
    fifo = bool(settings is not None and settings.subscription.fifo)
    name, addr = await _broker(core, topic, req.message_queue.broker.name)
    batch = checks.batch_size(req.batch_size)
    if deadline is not None:
        polling = checks.broker_polling_ms(cfg, polling, _left_ms(deadline))
    cmd = pop_request(pop_header(group, topic, sub, batch, invisible, polling,
                                 init_mode=INIT_MODE_MAX, order=fifo,
                                 attempt_id=req.attempt_id or None, broker_name=name))
    popping = asyncio.ensure_future(core.gateway.call(
        addr, cmd, f"receive from {name}", timeout=polling / 1000 + core.gateway.timeout))
    # The answer must beat the deadline: a broker later than that (an event loop too busy)
    # is not waited for.  What it pops then keeps its invisible time: 5.3.3 writes such an
    # answer to a call already over, its first write (the status) fails and nothing is nacked.
    guard = None if deadline is None else max(
        _left_ms(deadline) - cfg.long_polling_reserve_time_in_millis, 0) / 1000
    try:
        resp = await asyncio.wait_for(asyncio.shield(popping), guard)
    except TimeoutError:
        popping.add_done_callback(_unheard)
        yield spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
        return
    except asyncio.CancelledError:  # the client gave up (or the server stops)
        popping.add_done_callback(_unheard)
        raise
    max_attempts = settings.backoff_policy.max_attempts if settings is not None else 0
    answers = _answers(resp, name, group, topic, fifo,
                       functools.partial(_past_max_attempts, core, group, topic, max_attempts),
                       local=cfg.local_mode)
    written = 0
    try:
        for response in answers:
            yield response
            written += 1
    finally:
        if 0 < written < len(answers):  # a message's write failed: it and the rest nacked
            _nack_unwritten(core, group, topic, answers[written:])


def _answers(resp: RemotingCommand, name: str, group: str, topic: str, fifo: bool,
             deliverable: Callable[[list[pb.Message]], list[pb.Message]], *, local: bool
             ) -> list[spb.ReceiveMessageResponse]:
    """The stream's responses for the broker's answer to a POP_MESSAGE (of its messages, those
    `deliverable` keeps)."""
    if resp.code == ResponseCode.POLLING_FULL:
        return [spb.ReceiveMessageResponse(status=status(pb.TOO_MANY_REQUESTS, "polling full"))]
    if resp.code in (ResponseCode.NO_MESSAGE, ResponseCode.POLLING_TIMEOUT,
                     ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                     ResponseCode.PULL_OFFSET_MOVED):
        return [spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))]
    if resp.code != ResponseCode.SUCCESS:
        # a refusal (a group not allowed to consume: NO_PERMISSION): in local mode 5.3.3 turns
        # every such answer into INTERNAL_SERVER_ERROR with the broker's remark
        code = pb.INTERNAL_SERVER_ERROR if local else code_of_remoting(resp.code)
        return [spb.ReceiveMessageResponse(status=status(code, resp.remark or "receive failed"))]
    try:
        messages = deliverable(_messages(resp, name, group, topic, fifo))
    except (ProtocolError, ReceiptError) as exc:
        raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"POP answer does not decode: {exc}") \
            from None
    if not messages:
        return [spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND,
                                                         "no match message"))]
    return [spb.ReceiveMessageResponse(status=OK_STATUS),
            *(spb.ReceiveMessageResponse(message=message) for message in messages)]


def _unheard(done: asyncio.Future[RemotingCommand]) -> None:
    """A POP nobody waits for any more: its failure retrieved (nothing else to do)."""
    if not done.cancelled():
        done.exception()


def _nack_unwritten(core: ProxyCore, group: str, topic: str,
                    unwritten: list[spb.ReceiveMessageResponse]) -> None:
    """The messages a stream could not write, visible again in a second (5.3.3
    `processThrowableWhenWriteMessage`)."""
    handles = [r.message.system_properties.receipt_handle for r in unwritten
               if r.HasField("message")]
    if handles:
        task = asyncio.ensure_future(_nack(core, group, topic, handles))
        _NACKS.add(task)
        task.add_done_callback(_NACKS.discard)


#: Nacks under way (a reference keeps each task alive until it is done).
_NACKS: set[asyncio.Future[None]] = set()


async def _nack(core: ProxyCore, group: str, topic: str, handles: list[str]) -> None:
    for handle in handles:
        with contextlib.suppress(ProxyError):
            await _change(core, group, topic, parse_handle(handle), NACK_INVISIBLE_TIME_MS)


# ---------------------------------------------------------------------- ack / nack / DLQ

async def _addr(core: ProxyCore, broker: str, topic: str) -> str:
    addr = core.gateway.master_addr(await core.gateway.route(topic), broker)
    if addr is None:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, f"broker {broker} of the receipt is gone")
    return addr


def _checked(resp: RemotingCommand, addr: str, what: str) -> RemotingCommand:
    """The broker's answer if SUCCESS.  Raises ProxyError: the refusal, as 5.3 answers it."""
    if resp.code != ResponseCode.SUCCESS:
        try:
            raise_for(resp, addr)
        except ClientError as exc:
            raise broker_failure(exc, what) from None
    return resp


async def _call(core: ProxyCore, broker: str, topic: str, cmd: RemotingCommand,
                what: str) -> RemotingCommand:
    addr = await _addr(core, broker, topic)
    return _checked(await core.gateway.call(addr, cmd, what), addr, what)


async def _ack_one(core: ProxyCore, group: str, topic: str, handle: str) -> None:
    info = parse_handle(handle)
    await _call(core, info.broker_name, topic, ack_request(group, topic, info), "ack")


def _status_of(error: ProxyError) -> pb.Status:
    return status(error.code, error.message)


def _by_broker(handles: list[str], now_ms: int
               ) -> tuple[list[pb.Status], dict[str, list[tuple[int, ExtraInfo]]]]:
    """Each handle's status so far (OK, or why its handle is refused) and the receipts of
    the others by broker, with their index."""
    statuses: list[pb.Status] = [OK_STATUS] * len(handles)
    by_broker: dict[str, list[tuple[int, ExtraInfo]]] = {}
    for i, handle in enumerate(handles):
        try:
            info = parse_handle(handle, now_ms)
        except ProxyError as exc:
            statuses[i] = _status_of(exc)
            continue
        by_broker.setdefault(info.broker_name, []).append((i, info))
    return statuses, by_broker


async def _acks(core: ProxyCore, group: str, topic: str, handles: list[str],
                now_ms: int) -> list[pb.Status]:
    """One ACK_MESSAGE per entry, those of one broker sent at once; each its own answer."""
    statuses, by_broker = _by_broker(handles, now_ms)

    async def one(broker: str, entries: list[tuple[int, ExtraInfo]]) -> None:
        try:
            addr = await _addr(core, broker, topic)
            answers = await core.gateway.call_many(
                addr, [ack_request(group, topic, info) for _, info in entries], "ack")
        except ProxyError as exc:
            for i, _ in entries:
                statuses[i] = _status_of(exc)
            return
        for (i, _), answer in zip(entries, answers, strict=True):
            try:
                if isinstance(answer, ProxyError):
                    raise answer
                _checked(answer, addr, "ack")
            except ProxyError as exc:
                statuses[i] = _status_of(exc)

    await asyncio.gather(*(one(broker, entries) for broker, entries in by_broker.items()))
    return statuses


async def _batch_ack(core: ProxyCore, group: str, topic: str, handles: list[str],
                     now_ms: int) -> list[pb.Status]:
    """One BATCH_ACK_MESSAGE per broker; each entry gets its broker's answer."""
    statuses, by_broker = _by_broker(handles, now_ms)

    async def one(broker: str, entries: list[tuple[int, ExtraInfo]]) -> None:
        body = batch_ack_body(group, topic, (info for _, info in entries))
        cmd = request(RequestCode.BATCH_ACK_MESSAGE, None, fastjson.dumpb(to_json(body)))
        try:
            await _call(core, broker, topic, cmd, "batch ack")
            answer = OK_STATUS
        except ProxyError as exc:
            answer = _status_of(exc)
        for i, _ in entries:
            statuses[i] = answer

    await asyncio.gather(*(one(broker, entries) for broker, entries in by_broker.items()))
    return statuses


async def ack(core: ProxyCore, req: spb.AckMessageRequest) -> spb.AckMessageResponse:
    """The entries' acks all at once: they reach the broker together (one read, or one
    in-process run) and its handler of many acks stores them with one append; with
    enableBatchAck, one BATCH_ACK_MESSAGE per broker."""
    topic = validate_topic(req.topic)
    group = validate_group(req.group)
    handles = [entry.receipt_handle for entry in req.entries]
    acks = _batch_ack if core.config.enable_batch_ack else _acks
    statuses = await acks(core, group, topic, handles, _now_ms())
    entries = [spb.AckMessageResultEntry(message_id=entry.message_id,
                                         receipt_handle=entry.receipt_handle, status=st)
               for entry, st in zip(req.entries, statuses, strict=True)]
    codes = {e.status.code for e in entries}
    code = codes.pop() if len(codes) == 1 else (pb.MULTIPLE_RESULTS if codes else pb.OK)
    return spb.AckMessageResponse(status=status(code), entries=entries)


async def _change(core: ProxyCore, group: str, topic: str, info: ExtraInfo,
                  invisible: int) -> str:
    """CHANGE_MESSAGE_INVISIBLETIME of one receipt; the receipt that replaces it."""
    assert info.queue_offset is not None
    resp = await _call(core, info.broker_name, topic,
                       change_invisible_request(group, topic, info, invisible),
                       "change invisible duration")
    answer = from_ext(ChangeInvisibleTimeResponseHeader, resp.ext_fields)
    return ExtraInfo(info.queue_offset, answer.pop_time, answer.invisible_time,
                     answer.revive_qid, info.retry, info.broker_name, info.queue_id,
                     info.queue_offset).encode()


async def change_invisible(core: ProxyCore, req: spb.ChangeInvisibleDurationRequest
                           ) -> spb.ChangeInvisibleDurationResponse:
    """Checked in 5.3.3's order: topic, group, invisible time, receipt handle."""
    topic = validate_topic(req.topic)
    group = validate_group(req.group)
    invisible = _ms(req.invisible_duration)
    checks.check_invisible(core.config, invisible)
    info = parse_handle(req.receipt_handle, _now_ms())
    renewed = await _change(core, group, topic, info, invisible)
    commit_offset = req.receipt_handle.rsplit(" ", 1)[-1]
    return spb.ChangeInvisibleDurationResponse(
        status=OK_STATUS, receipt_handle=f"{renewed} {commit_offset}")


async def forward_to_dlq(core: ProxyCore, req: spb.ForwardMessageToDeadLetterQueueRequest
                         ) -> spb.ForwardMessageToDeadLetterQueueResponse:
    topic = validate_topic(req.topic)
    group = validate_group(req.group)
    await _to_dlq(core, group, topic, req.receipt_handle, req.message_id)
    return spb.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)


async def _to_dlq(core: ProxyCore, group: str, topic: str, handle: str, message_id: str
                  ) -> None:
    """The message of `handle` sent back with delay level -1 (its group's %DLQ%), then acked."""
    info = parse_handle(handle)
    parts = handle.split(" ")
    try:
        commit_offset = int(parts[8])
    except (IndexError, ValueError):
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle has no commit-log offset") \
            from None
    header = ConsumerSendMsgBackRequestHeader(
        offset=commit_offset, group=group, delay_level=DLQ_DELAY_LEVEL,
        origin_msg_id=message_id, origin_topic=info.topic(topic, group),
        max_reconsume_times=0)
    await _call(core, info.broker_name, topic,
                request(RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header)), "forward to DLQ")
    with contextlib.suppress(ProxyError):  # 5.3 acks after the forward, whatever the ack says
        await _ack_one(core, group, topic, handle)


def _past_max_attempts(core: ProxyCore, group: str, topic: str, max_attempts: int,
                       messages: list[pb.Message]) -> list[pb.Message]:
    """The messages to deliver: those delivered `max_attempts` times already (reconsume times
    at least that) go to the group's DLQ instead, in the background (5.3.3
    `PopMessageResultFilterImpl`, TO_DLQ)."""
    if max_attempts <= 0:
        return messages
    keep = []
    for message in messages:
        props = message.system_properties
        if props.delivery_attempt - 1 < max_attempts:
            keep.append(message)
            continue
        task = asyncio.ensure_future(_quietly(_to_dlq(core, group, topic,
                                                      props.receipt_handle,
                                                      props.message_id)))
        _NACKS.add(task)
        task.add_done_callback(_NACKS.discard)
    return keep


async def _quietly(work: Awaitable[None]) -> None:
    with contextlib.suppress(ProxyError):
        await work
