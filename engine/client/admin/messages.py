"""Broker admin calls that read stored messages: by key, by unique key, by id, by queue entry.

How this works: QUERY_MESSAGE and VIEW_MESSAGE_BY_ID answer with message records laid back
to back, in the commit-log layout `message.decode_records` reads.  The key index is a hash
table, so a lookup may also return messages whose key only collides with the one asked for;
like Apache's client, `query_message` keeps only the messages of the topic that carry the key
(or, for a unique-key lookup, whose message id is the key).  Bodies a producer compressed
(zlib, sysflag bit 0) are inflated as Apache's client does; lz4/zstd bodies (5.x) are left as
stored.  An offset message id holds the storing broker's address and the commit-log offset
(`message_store_addr`, `decode_offset_msg_id`).
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field

from engine.client.core.broker_call import BrokerCalls, decode_body, decode_header
from engine.client.core.errors import BadResponseError, QueryNotFoundError
from engine.protocol.body.admin import QueryConsumeQueueResponseBody
from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import QueueId, Topic
from engine.protocol.codes import RequestCode
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    MsgId,
    Offset,
    PhyOffset,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    TimestampMs,
    ViewMessageRequestHeader,
)
from engine.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    MessageRecord,
    decode_offset_msg_id,
    decode_records,
)
from engine.protocol.wire import to_ext

#: extFields flag of a unique-key (UNIQ_KEY) lookup (`MixAll.UNIQUE_MSG_QUERY_FLAG`).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: Apache's mqadmin looks keys up over all time: [0, Long.MAX_VALUE].
END_OF_TIME = 2**63 - 1
DEFAULT_MAX_NUM = 32


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    """QUERY_MESSAGE: the matching messages and how far the broker's index reaches."""

    messages: list[MessageRecord] = field(default_factory=list)
    index_last_update_timestamp: TimestampMs = 0
    index_last_update_phyoffset: PhyOffset = 0


def split_offset_msg_id(offset_msg_id: MsgId) -> tuple[str, PhyOffset]:
    """The ``ip:port`` of the broker that stored the message, and its commit-log offset.

    Raises:
        ValueError: not an offset message id (32 or 56 hex digits); a UNIQ_KEY id is
            looked up with `query_message_by_unique_key` instead.
    """
    try:
        (ip, port), offset = decode_offset_msg_id(offset_msg_id)
    except ProtocolError as exc:
        raise ValueError(f"{exc}; an offset message id is expected") from None
    return f"{ip}:{port}", offset  # IPv6 unbracketed, as Java's brokers write addresses


def message_store_addr(offset_msg_id: MsgId) -> str:
    """The ``ip:port`` of the broker that stored the message with this offset id.

    Raises:
        ValueError: not an offset message id.
    """
    return split_offset_msg_id(offset_msg_id)[0]


def inflated(record: MessageRecord) -> MessageRecord:
    """`record` with its body inflated when the producer compressed it with zlib."""
    if not record.sysflag & COMPRESSED_FLAG:
        return record
    kind = record.sysflag & COMPRESSION_TYPE_MASK
    if kind not in (0, COMPRESSION_ZLIB):  # 4.x sets no type bits: zlib
        return record
    try:
        return dataclasses.replace(record, body=zlib.decompress(record.body))
    except zlib.error:
        return record  # shown as stored rather than not at all


def parse_records(body: bytes | None, addr: str | None = None) -> list[MessageRecord]:
    """Records laid back to back (QUERY_MESSAGE / VIEW_MESSAGE_BY_ID body), inflated.

    Raises:
        BadResponseError: the bytes are not whole message records.
    """
    try:
        return [inflated(r) for r in decode_records(body or b"")]
    except ProtocolError as exc:
        raise BadResponseError(f"message records do not decode: {exc}", addr) from None


def _matches(record: MessageRecord, topic: Topic, key: str, unique: bool) -> bool:
    if record.topic != topic:
        return False
    return record.msg_id == key if unique else key in record.keys


class MessageCalls(BrokerCalls):
    """Stored messages of one broker."""

    async def query_message(self, addr: str, topic: Topic, key: str, *,
                            max_num: int = DEFAULT_MAX_NUM, begin: TimestampMs = 0,
                            end: TimestampMs = END_OF_TIME,
                            unique: bool = False) -> QueryMessageResult:
        """QUERY_MESSAGE (12): messages of `topic` with `key` in KEYS (or, with `unique`,
        whose UNIQ_KEY message id is `key`), stored within [begin, end] (ms).

        Returns:
            The matching messages, none when the broker found none (QUERY_NOT_FOUND).

        Raises:
            BadResponseError: the body is not message records.
        """
        header = QueryMessageRequestHeader(topic, key, max_num, begin, end)
        ext = to_ext(header)
        if unique:
            ext[UNIQUE_KEY_QUERY] = "true"
        try:
            resp = await self._call(addr, RequestCode.QUERY_MESSAGE, ext)
        except QueryNotFoundError:
            return QueryMessageResult()
        index = decode_header(QueryMessageResponseHeader, resp, addr)
        records = [r for r in parse_records(resp.body, addr) if _matches(r, topic, key, unique)]
        return QueryMessageResult(records, index.index_last_update_timestamp,
                                  index.index_last_update_phyoffset)

    async def query_message_by_unique_key(self, addr: str, topic: Topic, msg_id: MsgId, *,
                                          begin: TimestampMs = 0,
                                          end: TimestampMs = END_OF_TIME) -> list[MessageRecord]:
        """QUERY_MESSAGE (12) by UNIQ_KEY: the message(s) of `topic` with this message id
        (a retried send can store one id twice)."""
        result = await self.query_message(addr, topic, msg_id, begin=begin, end=end,
                                          unique=True)
        return result.messages

    async def view_message(self, addr: str, offset_msg_id: MsgId) -> MessageRecord:
        """VIEW_MESSAGE_BY_ID (33) for an offset message id (`message_store_addr` names the
        broker that stored it).

        Raises:
            ValueError: not an offset message id.
            ServerSystemError: no message at that commit-log offset.
        """
        _, offset = split_offset_msg_id(offset_msg_id)
        return await self.view_message_at(addr, offset)

    async def view_message_at(self, addr: str, phy_offset: PhyOffset) -> MessageRecord:
        """VIEW_MESSAGE_BY_ID (33): the message at a commit-log offset.

        Raises:
            ServerSystemError: no message there.
            BadResponseError: the body is not one message record.
        """
        resp = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                to_ext(ViewMessageRequestHeader(phy_offset)))
        records = parse_records(resp.body, addr)
        if not records:
            raise BadResponseError("VIEW_MESSAGE_BY_ID answer without a message", addr)
        return records[0]

    async def query_consume_queue(self, addr: str, topic: Topic, queue_id: QueueId,
                                  index: Offset, count: int, *,
                                  group: GroupName | None = None
                                  ) -> QueryConsumeQueueResponseBody:
        """QUERY_CONSUME_QUEUE (321): `count` consume-queue entries from `index` (commit-log
        offset, size, tags code), the queue's bounds, and `group`'s subscription.

        Entries outside the queue come back empty (the broker says so in its remark).

        Raises:
            ServerSystemError: the broker has no such queue.
        """
        header = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group)
        resp = await self._call(addr, RequestCode.QUERY_CONSUME_QUEUE, to_ext(header))
        return decode_body(QueryConsumeQueueResponseBody, resp.body, addr)
