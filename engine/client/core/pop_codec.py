"""POP requests and their answers as `PopResult` (5.3 `MQClientAPIImpl.processPopResponse`).

How this works: the POP_MESSAGE header, the ACK_MESSAGE and the CHANGE_MESSAGE_INVISIBLETIME
requests are built here for both the client (`pop_calls.py`) and the gRPC proxy, so the two
send the same fields: an ack or a change names the topic the receipt was popped from (the
group's pop retry topic for a retry receipt) and the receipt's broker.  A POP answer carries
the popped records and, per queue, the checkpoint's start offset, the popped offsets and
(FIFO) the pop counts (`engine.protocol.receipt`).  Each message gets its receipt as the
POP_CK property, built from those strings exactly as 5.3's client builds it, so an ack names
the checkpoint the broker wrote; a FIFO message popped before gets its pop count as its
reconsume times.  Messages keep the topic asked for (a message popped from the group's pop
retry topic reports the topic it retries, and `queue_topic` says where it sits).  Codes 0,
19, 208, 209 and 210 are results; any other code raises its `ServerError`.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from engine.client.core.compression import inflate
from engine.client.core.errors import BadResponseError, raise_for
from engine.client.core.message import MessageExt
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from engine.protocol.message import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    decode_records,
    string_to_properties,
)
from engine.protocol.receipt import ExtraInfo, popped
from engine.protocol.wire import from_ext, to_ext


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


_STATUS: dict[int, PopStatus] = {ResponseCode.SUCCESS: PopStatus.FOUND,
           ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
           ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
           ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
           ResponseCode.NO_MESSAGE: PopStatus.NO_NEW_MSG}


@dataclass(frozen=True, slots=True)
class PopResult:
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


def pop_header(group: str, topic: str, sub: SubscriptionData, max_nums: int,
               invisible_ms: int, poll_ms: int, *, init_mode: int, order: bool = False,
               attempt_id: str | None = None, broker_name: str | None = None
               ) -> PopMessageRequestHeader:
    """POP_MESSAGE from every queue (-1) of `topic` through `sub`'s filter, born now."""
    return PopMessageRequestHeader(group, topic, -1, max_nums, invisible_ms, poll_ms,
                                   int(time.time() * 1000), init_mode,
                                   sub.expression_type.value, sub.sub_string, order, attempt_id,
                                   broker_name)


def pop_request(header: PopMessageRequestHeader) -> RemotingCommand:
    return request(RequestCode.POP_MESSAGE, to_ext(header))


def ack_request(group: str, topic: str, receipt: ExtraInfo) -> RemotingCommand:
    """ACK_MESSAGE of one popped message (`topic`: the one it was popped for).

    Raises:
        ValueError: the receipt lacks the message's offset.
    """
    if receipt.queue_offset is None:
        raise ValueError("a receipt without the message's offset cannot be acked")
    header = AckMessageRequestHeader(group, receipt.topic(topic, group), receipt.queue_id,
                                     receipt.encode(), receipt.queue_offset,
                                     receipt.broker_name)
    return request(RequestCode.ACK_MESSAGE, to_ext(header))


def change_invisible_request(group: str, topic: str, receipt: ExtraInfo,
                             invisible_ms: int) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME: the popped message turns visible `invisible_ms` from now.

    Raises:
        ValueError: the receipt lacks the message's offset.
    """
    if receipt.queue_offset is None:
        raise ValueError("a receipt without the message's offset cannot be changed")
    header = ChangeInvisibleTimeRequestHeader(group, receipt.topic(topic, group),
                                              receipt.queue_id, receipt.encode(),
                                              receipt.queue_offset, invisible_ms,
                                              receipt.broker_name)
    return request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, to_ext(header))


def receipt_of(msg: MessageExt) -> ExtraInfo:
    """The message's receipt (its POP_CK property).

    Raises:
        ValueError: the message was not popped.
        ReceiptError: the property does not parse.
    """
    text = msg.properties.get(PROPERTY_POP_CK)
    if text is None:
        raise ValueError(f"message {msg.msg_id} was not popped: it has no receipt")
    return ExtraInfo.parse(text)


def pop_result(cmd: RemotingCommand, header: PopMessageRequestHeader, broker_name: str,
               addr: str) -> PopResult:
    """Raises ServerError for an error code, BadResponseError for an answer that does not
    decode."""
    status = _STATUS.get(cmd.code)
    if status is None:
        raise_for(cmd, addr)
        raise BadResponseError(f"pop answered code {cmd.code}", addr)
    try:
        resp = from_ext(PopMessageResponseHeader, cmd.ext_fields)
    except ProtocolError as exc:
        if status is not PopStatus.FOUND:
            return PopResult(status)
        raise BadResponseError(f"pop answer lacks its header: {exc}", addr) from None
    if status is not PopStatus.FOUND:
        return PopResult(status, rest_num=resp.rest_num)
    try:
        messages = _messages(cmd.body or b"", resp, header, broker_name)
    except ProtocolError as exc:
        raise BadResponseError(f"popped messages do not decode: {exc!r}", addr) from None
    return PopResult(status, messages, resp.pop_time, resp.invisible_time, resp.rest_num)


def _messages(body: bytes, resp: PopMessageResponseHeader, header: PopMessageRequestHeader,
              broker_name: str) -> list[MessageExt]:
    records = decode_records(body)
    all_props = [string_to_properties(r.properties_raw.decode()) for r in records]
    receipts = popped(resp, broker_name,
                      ((r.topic, r.queue_id, r.queue_offset, p.get(PROPERTY_POP_CK))
                       for r, p in zip(records, all_props, strict=True)),
                      order=header.order)
    first_pop = str(resp.pop_time)
    out: list[MessageExt] = []
    for r, props, got in zip(records, all_props, receipts, strict=True):
        reconsume = r.reconsume_times
        props[PROPERTY_POP_CK] = got.receipt.encode()
        if got.pop_count:
            reconsume = got.pop_count
        props.setdefault(PROPERTY_FIRST_POP_TIME, first_pop)
        out.append(MessageExt(
            header.topic, inflate(r.body, r.sysflag), props, broker_name, r.queue_id,
            r.queue_offset, r.physical_offset, r.sysflag, r.flag, r.born_timestamp,
            r.born_host, r.store_timestamp, r.store_host, reconsume,
            r.prepared_transaction_offset, r.body_crc, r.total_size, r.topic))
    return out
