"""Custom headers of the broker's requests and responses (4.9.7 field names and types).

How this works: a field without a default is a Java `@CFNotNull` object field (`from_ext`
raises `HeaderError` when it is missing); Java primitives (`int`, `long`, `boolean`) default to
Java's zero value and are always written; other nullable fields default to None and are
omitted.  Headers whose Java class extends 4.9.x `RpcRequestHeader` end with the optional
`bname` (broker name).  SEND_MESSAGE_V2/SEND_BATCH_MESSAGE carry the same content as
SEND_MESSAGE under one-letter keys; `send_header_v1`/`send_header_v2` convert between them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from engine.protocol import native
from engine.protocol.body.heartbeat import ClientId, GroupName
from engine.protocol.body.message_queue import QueueId, Topic
from engine.protocol.body.route import BrokerName
from engine.protocol.body.topic import TopicFilterType
from engine.protocol.errors import HeaderError
from engine.protocol.wire import Int32, from_ext, wire_name

Offset = int  # logical (consume-queue) offset
PhyOffset = int  # commit-log offset
TimestampMs = int
MsgId = str
Properties = str  # name \x01 value \x02 ... (message-format.md §5)

# END_TRANSACTION commitOrRollback values (MessageSysFlag).
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 8
TRANSACTION_ROLLBACK_TYPE = 12

# ---------------------------------------------------------------------------- send


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (10), and what V2 headers are converted into."""

    producer_group: GroupName
    topic: Topic
    default_topic: Topic
    default_topic_queue_nums: Int32
    queue_id: QueueId  # < 0: the broker picks a writable queue
    sys_flag: Int32
    born_timestamp: TimestampMs
    flag: Int32
    properties: Properties | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: Int32 | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2:
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): `SendMessageRequestHeader`, keys a..n.

    a producerGroup, b topic, c defaultTopic, d defaultTopicQueueNums, e queueId, f sysFlag,
    g bornTimestamp, h flag, i properties, j reconsumeTimes, k unitMode, l maxReconsumeTimes,
    m batch, n brokerName (V1's `bname`).  The inherited `bname` stays null in 4.9.7.
    """

    a: GroupName
    b: Topic
    c: Topic
    d: Int32
    e: QueueId
    f: Int32
    g: TimestampMs
    h: Int32
    i: Properties | None = None
    j: Int32 | None = None
    k: bool = False
    l: Int32 | None = None  # noqa: E741 - Java's key
    m: bool = False
    n: BrokerName | None = None
    bname: BrokerName | None = None


def send_header_v1(v2: SendMessageRequestHeaderV2) -> SendMessageRequestHeader:
    """`createSendMessageRequestHeaderV1`: the broker name travels as `n`, lands in `bname`."""
    return SendMessageRequestHeader(
        producer_group=v2.a,
        topic=v2.b,
        default_topic=v2.c,
        default_topic_queue_nums=v2.d,
        queue_id=v2.e,
        sys_flag=v2.f,
        born_timestamp=v2.g,
        flag=v2.h,
        properties=v2.i,
        reconsume_times=v2.j,
        unit_mode=v2.k,
        max_reconsume_times=v2.l,
        batch=v2.m,
        bname=v2.n if v2.n is not None else v2.bname,
    )


class SendHeader(NamedTuple):
    """`SendMessageRequestHeader`'s fields as an immutable tuple: what the broker decodes on
    every send (building the frozen dataclass cost more than the rest of the decoding)."""

    producer_group: GroupName
    topic: Topic
    default_topic: Topic
    default_topic_queue_nums: int
    queue_id: QueueId
    sys_flag: int
    born_timestamp: TimestampMs
    flag: int
    properties: Properties | None
    reconsume_times: int | None
    unit_mode: bool
    batch: bool
    max_reconsume_times: int | None
    bname: BrokerName | None

    @classmethod
    def of(cls, h: SendMessageRequestHeader) -> SendHeader:
        return cls(h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums,
                   h.queue_id, h.sys_flag, h.born_timestamp, h.flag, h.properties,
                   h.reconsume_times, h.unit_mode, h.batch, h.max_reconsume_times, h.bname)


_new_send_header = tuple.__new__
native.register_send_header(SendHeader)


def decode_send_header_v2(ext: Mapping[str, str] | None) -> SendHeader:
    """`send_header_v1(from_ext(SendMessageRequestHeaderV2, ext))` as a `SendHeader`, read
    directly: one runs per send.  Anything unusual takes the general path, which raises the
    precise HeaderError (naming the field by its V1 name too).

    Raises:
        HeaderError: a field is missing, not a number, or out of its Java type's range.
    """
    if ext is None:
        ext = {}
    fast = native.send_header_v2
    if fast is not None:
        header: SendHeader | None = fast(ext)
        if header is not None:
            return header
    try:
        j, k, ll, m = ext.get("j"), ext.get("k"), ext.get("l"), ext.get("m")
        d, e, f, g, h = int(ext["d"]), int(ext["e"]), int(ext["f"]), int(ext["g"]), int(ext["h"])
        reconsume = int(j) if j else None
        max_reconsume = int(ll) if ll else None
        if not (_I32 <= d < -_I32 and _I32 <= e < -_I32 and _I32 <= f < -_I32
                and _I32 <= h < -_I32 and _I64 <= g < -_I64
                and (reconsume is None or _I32 <= reconsume < -_I32)
                and (max_reconsume is None or _I32 <= max_reconsume < -_I32)):
            raise ValueError("out of range")
        return _new_send_header(SendHeader, (
            ext["a"], ext["b"], ext["c"], d, e, f, g, h, ext.get("i"), reconsume,
            k is not None and k.strip().lower() == "true",
            m is not None and m.strip().lower() == "true",
            max_reconsume, ext.get("n") or ext.get("bname"),
        ))  # fmt: skip
    except (KeyError, ValueError):
        try:
            return SendHeader.of(send_header_v1(from_ext(SendMessageRequestHeaderV2, ext)))
        except HeaderError as exc:
            raise HeaderError(_V2_FIELD.sub(_v1_name, str(exc))) from None


def decode_send_header_v1(ext: Mapping[str, str] | None) -> SendHeader:
    """`from_ext(SendMessageRequestHeader, ext)` as a `SendHeader`, read directly (the C++
    client sends SEND_MESSAGE); anything unusual takes the general path.

    Raises:
        HeaderError: a field is missing, not a number, or out of its Java type's range.
    """
    if ext is None:
        ext = {}
    try:
        j, k, ll, m = (ext.get("reconsumeTimes"), ext.get("unitMode"),
                       ext.get("maxReconsumeTimes"), ext.get("batch"))
        d, e, f = int(ext["defaultTopicQueueNums"]), int(ext["queueId"]), int(ext["sysFlag"])
        g, h = int(ext["bornTimestamp"]), int(ext["flag"])
        reconsume = int(j) if j else None
        max_reconsume = int(ll) if ll else None
        if not (_I32 <= d < -_I32 and _I32 <= e < -_I32 and _I32 <= f < -_I32
                and _I32 <= h < -_I32 and _I64 <= g < -_I64
                and (reconsume is None or _I32 <= reconsume < -_I32)
                and (max_reconsume is None or _I32 <= max_reconsume < -_I32)):
            raise ValueError("out of range")
        return _new_send_header(SendHeader, (
            ext["producerGroup"], ext["topic"], ext["defaultTopic"], d, e, f, g, h,
            ext.get("properties"), reconsume, k is not None and k.strip().lower() == "true",
            m is not None and m.strip().lower() == "true", max_reconsume, ext.get("bname"),
        ))  # fmt: skip
    except (KeyError, ValueError):
        return SendHeader.of(from_ext(SendMessageRequestHeader, ext))


_I32, _I64 = -(1 << 31), -(1 << 63)
_V1_NAMES = dict(zip("abcdefghijklmn", (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes",
    "batch", "brokerName"), strict=True))
_V2_FIELD = re.compile(r"(SendMessageRequestHeaderV2\.|required field ')([a-n])(')?")


def _v1_name(m: re.Match[str]) -> str:
    return f"{m[1]}{m[2]}{m[3] or ''} ({_V1_NAMES[m[2]]})"


def send_header_v2(v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
    """`createSendMessageRequestHeaderV2`: `bname` becomes `n`."""
    return SendMessageRequestHeaderV2(
        a=v1.producer_group,
        b=v1.topic,
        c=v1.default_topic,
        d=v1.default_topic_queue_nums,
        e=v1.queue_id,
        f=v1.sys_flag,
        g=v1.born_timestamp,
        h=v1.flag,
        i=v1.properties,
        j=v1.reconsume_times,
        k=v1.unit_mode,
        l=v1.max_reconsume_times,
        m=v1.batch,
        n=v1.bname,
    )


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader:
    """Answer to 10/310/320; the broker also adds extFields MSG_REGION and TRACE_ON."""

    msg_id: MsgId  # offset message id; comma-joined for batches
    queue_id: QueueId
    queue_offset: Offset  # of the first message
    transaction_id: str | None = None
    recall_handle: str | None = None  # 5.3: a timer message's (`engine.protocol.recall`)


# ---------------------------------------------------------------------------- pull, query


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader:
    consumer_group: GroupName
    topic: Topic
    queue_id: QueueId
    queue_offset: Offset
    max_msg_nums: int
    sys_flag: int  # PullSysFlag bits
    commit_offset: Offset
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None  # "TAG" / "SQL92"
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader:
    suggest_which_broker_id: int
    next_begin_offset: Offset
    min_offset: Offset
    max_offset: Offset


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12); extFields `_UNIQUE_KEY_QUERY`="true" asks for a unique-key lookup."""

    topic: Topic
    key: str
    max_num: int
    begin_timestamp: TimestampMs
    end_timestamp: TimestampMs


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader:
    index_last_update_timestamp: TimestampMs
    index_last_update_phyoffset: PhyOffset


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader:
    offset: PhyOffset


# ---------------------------------------------------------------------------- offsets


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    consumer_group: GroupName
    topic: Topic
    queue_id: QueueId
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader:
    offset: Offset


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader:
    consumer_group: GroupName
    topic: Topic
    queue_id: QueueId
    commit_offset: Offset
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader:
    topic: Topic
    queue_id: QueueId
    timestamp: TimestampMs
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader:
    offset: Offset


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader:
    topic: Topic
    queue_id: QueueId
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader:
    offset: Offset  # the next offset to be written


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader:
    topic: Topic
    queue_id: QueueId
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader:
    offset: Offset


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader:
    topic: Topic
    queue_id: QueueId
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: TimestampMs


# ---------------------------------------------------------------------------- clients


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader:
    client_id: ClientId = wire_name("clientID")
    producer_group: GroupName | None = None
    consumer_group: GroupName | None = None


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader:
    offset: PhyOffset  # commit-log offset of the consumed message
    group: GroupName
    delay_level: int
    origin_msg_id: MsgId | None = None
    origin_topic: Topic | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader:
    producer_group: GroupName
    tran_state_table_offset: Offset
    commit_log_offset: PhyOffset
    commit_or_rollback: int  # TRANSACTION_NOT/COMMIT/ROLLBACK_TYPE
    msg_id: MsgId
    from_transaction_check: bool = False
    transaction_id: str | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader:
    """RECALL_MESSAGE (370, 5.3): withdraw the timer message a recall handle names."""

    topic: Topic
    recall_handle: str
    producer_group: GroupName | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class RecallMessageResponseHeader:
    msg_id: MsgId  # the recalled message's unique key (UNIQ_KEY)


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader:
    """Broker -> producer (39), oneway."""

    tran_state_table_offset: Offset
    commit_log_offset: PhyOffset
    msg_id: MsgId | None = None
    transaction_id: str | None = None
    offset_msg_id: MsgId | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader:
    consumer_group: GroupName


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    """Broker -> consumer (40), oneway."""

    consumer_group: GroupName


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader:
    consumer_group: GroupName
    client_id: ClientId
    jstack_enable: bool = False


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader:
    consumer_group: GroupName
    client_id: ClientId | None = None
    msg_id: MsgId | None = None
    broker_name: BrokerName | None = None


# ---------------------------------------------------------------------------- admin


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: Topic
    default_topic: Topic
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: TopicFilterType
    order: bool = False  # @CFNotNull in Java, but 4.9.7 never reads it: tolerate its absence
    topic_sys_flag: int | None = None
    #: 5.x: the attribute changes, `+message.type=FIFO,-reserve.time` (absent from 4.x).
    attributes: str | None = None


@dataclass(frozen=True, slots=True)
class GetTopicConfigRequestHeader:
    """GET_TOPIC_CONFIG (351, 5.x); `lo` asks for a static topic's queue mapping too."""

    topic: Topic
    lo: bool | None = None
    bname: BrokerName | None = None  # RpcRequestHeader's routing field


@dataclass(frozen=True, slots=True)
class GetSubscriptionGroupConfigRequestHeader:
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, 5.x)."""

    group: GroupName
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader:
    topic: Topic


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader:
    topic: Topic


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader:
    consumer_group: GroupName


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader:
    producer_group: GroupName


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader:
    group_name: GroupName
    remove_offset: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader:
    consumer_group: GroupName
    topic: Topic | None = None


@dataclass(frozen=True, slots=True)
class GetConsumeStatsInBrokerHeader:
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool = False


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: Topic
    group: GroupName
    timestamp: TimestampMs = 0  # -1: reset to the max offset
    is_force: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: Topic
    group: GroupName
    client_addr: str | None = None


@dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader:
    topic: Topic


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanRequestHeader:
    topic: Topic
    group: GroupName


@dataclass(frozen=True, slots=True)
class QueryCorrectionOffsetHeader:
    compare_group: GroupName
    topic: Topic
    filter_groups: str | None = None  # comma-separated groups


@dataclass(frozen=True, slots=True)
class CloneGroupOffsetRequestHeader:
    src_group: GroupName
    dest_group: GroupName
    topic: Topic | None = None
    offline: bool = False


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader:
    stats_name: str
    stats_key: str


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueRequestHeader:
    """QUERY_CONSUME_QUEUE (321); Java declares no field `@CFNotNull` here."""

    topic: Topic | None = None
    queue_id: QueueId = 0
    index: Offset = 0
    count: int = 0
    consumer_group: GroupName | None = None
