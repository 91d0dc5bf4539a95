"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over POP.

How this works (5.3 `ReceiveMessageActivity`, `AckMessageActivity`, `ChangeInvisibleDuration
Activity`, `ForwardMessageToDLQActivity`): a receive is one POP_MESSAGE (200050) to a broker
of the topic (the one the request names, else the brokers in turn) for every queue (-1),
held by the broker up to the long-polling time (the request's, capped by the call's
deadline minus longPollingReserveTimeInMillis, within the min/max settings).  The answer's
offset infos give each message its receipt, as 5.3's client does (`engine.protocol.receipt`);
the client's receipt handle is that receipt plus the message's commit-log offset (5.3
`ReceiptHandle`).  The stream answers a status first (OK, MESSAGE_NOT_FOUND or
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
import time
from collections.abc import AsyncIterator

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
from engine.proxy.brokers import broker_failure
from engine.proxy.clients import validate_group, validate_topic
from engine.proxy.core import ProxyCore
from engine.proxy.messages import to_proto
from engine.proxy.sessions import ClientSession, subscription
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

def _invisible_ms(core: ProxyCore, req: spb.ReceiveMessageRequest) -> int:
    cfg = core.config
    if req.auto_renew or not req.HasField("invisible_duration"):
        return cfg.default_invisible_time_mills
    value = _ms(req.invisible_duration)
    if value < cfg.min_invisible_time_mills_for_recv or value > cfg.max_invisible_time_mills:
        raise ProxyError(pb.ILLEGAL_INVISIBLE_TIME, "the invisible time must be within "
                         f"[{cfg.min_invisible_time_mills_for_recv}, "
                         f"{cfg.max_invisible_time_mills}] ms")
    return value


def _polling_ms(core: ProxyCore, req: spb.ReceiveMessageRequest,
                context: grpc.aio.ServicerContext[object, object]) -> int:
    cfg = core.config
    if req.HasField("long_polling_timeout"):
        polling = _ms(req.long_polling_timeout)
    else:
        polling = cfg.grpc_client_consumer_max_long_polling_timeout_millis
    remaining = context.time_remaining()
    if remaining is not None:
        polling = min(polling, int(remaining * 1000) - cfg.long_polling_reserve_time_in_millis)
    if polling > cfg.grpc_client_consumer_max_long_polling_timeout_millis:
        raise ProxyError(pb.ILLEGAL_POLLING_TIME, "the long polling time must be at most "
                         f"{cfg.grpc_client_consumer_max_long_polling_timeout_millis} ms")
    return max(polling, 0)


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


async def receive(core: ProxyCore, session: ClientSession, req: spb.ReceiveMessageRequest,
                  context: grpc.aio.ServicerContext[object, object]
                  ) -> AsyncIterator[spb.ReceiveMessageResponse]:
    """The responses of one ReceiveMessage (a status first, then the messages)."""
    group = validate_group(req.group)
    topic = validate_topic(req.message_queue.topic)
    invisible = _invisible_ms(core, req)
    polling = _polling_ms(core, req, context)
    batch = req.batch_size if req.batch_size > 0 else 32
    sub = subscription(pb.SubscriptionEntry(topic=req.message_queue.topic,
                                            expression=req.filter_expression))
    fifo = bool(session.settings is not None and session.settings.subscription.fifo)
    name, addr = await _broker(core, topic, req.message_queue.broker.name)
    cmd = pop_request(pop_header(group, topic, sub, batch, invisible, polling,
                                 init_mode=INIT_MODE_MAX, order=fifo,
                                 attempt_id=req.attempt_id or None, broker_name=name))
    resp = await core.gateway.call(addr, cmd, f"receive from {name}",
                                   timeout=polling / 1000 + core.gateway.timeout)
    if resp.code == ResponseCode.POLLING_FULL:
        yield spb.ReceiveMessageResponse(status=status(pb.TOO_MANY_REQUESTS, "polling full"))
        return
    if resp.code in (ResponseCode.NO_MESSAGE, ResponseCode.POLLING_TIMEOUT,
                     ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                     ResponseCode.PULL_OFFSET_MOVED):
        yield spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
        return
    if resp.code != ResponseCode.SUCCESS:
        yield spb.ReceiveMessageResponse(status=status(code_of_remoting(resp.code),
                                                       resp.remark or "receive failed"))
        return
    try:
        messages = _messages(resp, name, group, topic, fifo)
    except (ProtocolError, ReceiptError) as exc:
        raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"POP answer does not decode: {exc}") \
            from None
    if not messages:
        yield spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no match message"))
        return
    yield spb.ReceiveMessageResponse(status=OK_STATUS)
    for message in messages:
        yield spb.ReceiveMessageResponse(message=message)


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
    group = validate_group(req.group)
    topic = validate_topic(req.topic)
    handles = [entry.receipt_handle for entry in req.entries]
    acks = _batch_ack if core.config.enable_batch_ack else _acks
    statuses = await acks(core, group, topic, handles, _now_ms())
    entries = [spb.AckMessageResultEntry(message_id=entry.message_id,
                                         receipt_handle=entry.receipt_handle, status=st)
               for entry, st in zip(req.entries, statuses, strict=True)]
    codes = {e.status.code for e in entries}
    code = codes.pop() if len(codes) == 1 else (pb.MULTIPLE_RESULTS if codes else pb.OK)
    return spb.AckMessageResponse(status=status(code), entries=entries)


async def change_invisible(core: ProxyCore, req: spb.ChangeInvisibleDurationRequest
                           ) -> spb.ChangeInvisibleDurationResponse:
    group = validate_group(req.group)
    topic = validate_topic(req.topic)
    info = parse_handle(req.receipt_handle, _now_ms())
    assert info.queue_offset is not None
    invisible = _ms(req.invisible_duration)
    if invisible < 0 or invisible > core.config.max_invisible_time_mills:
        raise ProxyError(pb.ILLEGAL_INVISIBLE_TIME, "the invisible time must be within "
                         f"[0, {core.config.max_invisible_time_mills}] ms")
    resp = await _call(core, info.broker_name, topic,
                       change_invisible_request(group, topic, info, invisible),
                       "change invisible duration")
    answer = from_ext(ChangeInvisibleTimeResponseHeader, resp.ext_fields)
    renewed = ExtraInfo(info.queue_offset, answer.pop_time, answer.invisible_time,
                        answer.revive_qid, info.retry, info.broker_name, info.queue_id,
                        info.queue_offset).encode()
    commit_offset = req.receipt_handle.rsplit(" ", 1)[-1]
    return spb.ChangeInvisibleDurationResponse(
        status=OK_STATUS, receipt_handle=f"{renewed} {commit_offset}")


async def forward_to_dlq(core: ProxyCore, req: spb.ForwardMessageToDeadLetterQueueRequest
                         ) -> spb.ForwardMessageToDeadLetterQueueResponse:
    group = validate_group(req.group)
    topic = validate_topic(req.topic)
    info = parse_handle(req.receipt_handle)
    parts = req.receipt_handle.split(" ")
    try:
        commit_offset = int(parts[8])
    except (IndexError, ValueError):
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle has no commit-log offset") \
            from None
    header = ConsumerSendMsgBackRequestHeader(
        offset=commit_offset, group=group, delay_level=DLQ_DELAY_LEVEL,
        origin_msg_id=req.message_id, origin_topic=info.topic(topic, group),
        max_reconsume_times=0)
    await _call(core, info.broker_name, topic,
                request(RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header)), "forward to DLQ")
    with contextlib.suppress(ProxyError):  # 5.3 acks after the forward, whatever the ack says
        await _ack_one(core, group, topic, req.receipt_handle)
    return spb.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)
