"""Message trace records and their text encoding (Apache's `TraceDataEncoder`), sans-IO.

How this works: a trace message (topic RMQ_SYS_TRACE_TOPIC by default) carries, as its UTF-8
body, records laid end to end; each record ends with FIELD_SPLITOR (\\u0002) and its fields
are separated by CONTENT_SPLITOR (\\u0001).  The first field names the record type:

    Pub             timestamp region group topic msgId tags keys storeHost bodyLength
                    costTime msgType offsetMsgId success [clientHost (5.x readers)]
    SubBefore       timestamp region group requestId msgId retryTimes keys
    SubAfter        requestId msgId costTime success keys [contextCode [timestamp group]]
    EndTransaction  timestamp region group topic msgId tags keys storeHost msgType
                    transactionId transactionState fromTransactionCheck
    Recall (5.3)    timestamp region group topic msgId success

Java writes a missing string as ``null`` (StringBuilder.append of a null) and booleans as
``true``/``false``; its reader splits with `String.split`, which drops trailing empty fields.
Both habits are kept, so a record encoded here is byte for byte what the Java client writes
and every record the Java clients (4.9 and 5.x) write decodes.  The trace message's KEYS hold
every traced message id and key (`record_keys`), which is how the broker's key index finds
the traces of a message id.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from engine.protocol.errors import ProtocolError

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
KEY_SEPARATOR = " "
#: TopicValidator.RMQ_SYS_TRACE_TOPIC
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: MixAll.DEFAULT_TRACE_REGION_ID
DEFAULT_REGION = "DefaultRegion"
#: TraceConstants.GROUP_NAME_PREFIX: the trace producer's group starts so
TRACE_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
_NULL = "null"
TRANSACTION_STATES = frozenset({"COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"})


class TraceType(enum.Enum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"
    RECALL = "Recall"


class MessageType(enum.IntEnum):
    """`MessageType`, written as its ordinal (Order_Msg is 5.x's)."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3
    ORDER = 4


class ConsumeReturnType(enum.IntEnum):
    """`ConsumeReturnType`: SubAfter's contextCode is its ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class PubRecord:
    """A send (SendMessageTraceHookImpl)."""

    timestamp: int  # ms, when the send began
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str | None
    keys: str | None  # KEYS as sent: space-separated
    store_host: str  # the broker address the message was sent to
    body_length: int
    cost_ms: int
    msg_type: MessageType
    offset_msg_id: str | None
    success: bool  # stored with SEND_OK
    client_host: str | None = None  # only in records of 5.x writers; never written here
    kind: ClassVar[TraceType] = TraceType.PUB


@dataclass(frozen=True, slots=True)
class SubBeforeRecord:
    """A message handed to a consumer's listener (ConsumeMessageTraceHookImpl, before)."""

    timestamp: int
    region_id: str | None
    group: str
    request_id: str  # shared with the SubAfter of the same listener call
    msg_id: str
    retry_times: int
    keys: str | None
    kind: ClassVar[TraceType] = TraceType.SUB_BEFORE


@dataclass(frozen=True, slots=True)
class SubAfterRecord:
    """The listener's verdict (ConsumeMessageTraceHookImpl, after)."""

    request_id: str
    msg_id: str
    cost_ms: int  # the call's time divided by its number of messages
    success: bool
    keys: str | None
    context_code: int | None = ConsumeReturnType.SUCCESS  # None: an old writer's record
    timestamp: int | None = None  # None: written for Alibaba Cloud (AccessChannel.CLOUD)
    group: str | None = None
    kind: ClassVar[TraceType] = TraceType.SUB_AFTER


@dataclass(frozen=True, slots=True)
class EndTransactionRecord:
    """A transaction's commit or rollback (EndTransactionTraceHookImpl)."""

    timestamp: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str | None
    keys: str | None
    store_host: str
    msg_type: MessageType
    transaction_id: str | None
    transaction_state: str  # COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW
    from_transaction_check: bool
    kind: ClassVar[TraceType] = TraceType.END_TRANSACTION


@dataclass(frozen=True, slots=True)
class RecallRecord:
    """A recalled delay message (5.3)."""

    timestamp: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    success: bool
    kind: ClassVar[TraceType] = TraceType.RECALL


TraceRecord = PubRecord | SubBeforeRecord | SubAfterRecord | EndTransactionRecord | RecallRecord


# ---------------------------------------------------------------------------- encoding


def _o(value: str | None) -> str:
    """A string field as Java appends it: a missing one is ``null``."""
    return _NULL if value is None else value


def _b(value: bool) -> str:
    return "true" if value else "false"


def pub_text(timestamp: int, region_id: str, group: str, topic: str, msg_id: str,
             tags: str | None, keys: str | None, store_host: str, body_length: int,
             cost_ms: int, msg_type: MessageType, offset_msg_id: str | None,
             success: bool) -> str:
    """`encode` of the PubRecord with these fields, without making the record."""
    c = CONTENT_SPLITOR
    return (f"Pub{c}{timestamp}{c}{region_id}{c}{group}{c}{topic}{c}{msg_id}{c}"
            f"{_NULL if tags is None else tags}{c}{_NULL if keys is None else keys}{c}"
            f"{store_host}{c}{body_length}{c}{cost_ms}{c}{int(msg_type)}{c}"
            f"{_NULL if offset_msg_id is None else offset_msg_id}{c}"
            f"{'true' if success else 'false'}{FIELD_SPLITOR}")


def encode(record: TraceRecord) -> str:
    """The record as `TraceDataEncoder.encoderFromContextBean` writes it (one bean)."""
    r = record
    c = CONTENT_SPLITOR
    if isinstance(r, PubRecord):
        return pub_text(r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys,
                        r.store_host, r.body_length, r.cost_ms, r.msg_type, r.offset_msg_id,
                        r.success)
    if isinstance(r, SubBeforeRecord):
        return (f"SubBefore{c}{r.timestamp}{c}{_o(r.region_id)}{c}{r.group}{c}{r.request_id}"
                f"{c}{r.msg_id}{c}{r.retry_times}{c}{_o(r.keys)}{FIELD_SPLITOR}")
    if isinstance(r, SubAfterRecord):
        code = 0 if r.context_code is None else int(r.context_code)
        # written for AccessChannel.CLOUD, the record stops after contextCode's splitter
        tail = "" if r.timestamp is None else f"{r.timestamp}{c}{_o(r.group)}"
        return (f"SubAfter{c}{r.request_id}{c}{r.msg_id}{c}{r.cost_ms}{c}{_b(r.success)}{c}"
                f"{_o(r.keys)}{c}{code}{c}{tail}{FIELD_SPLITOR}")
    if isinstance(r, EndTransactionRecord):
        return (f"EndTransaction{c}{r.timestamp}{c}{r.region_id}{c}{r.group}{c}{r.topic}{c}"
                f"{r.msg_id}{c}{_o(r.tags)}{c}{_o(r.keys)}{c}{r.store_host}{c}"
                f"{int(r.msg_type)}{c}{_o(r.transaction_id)}{c}{r.transaction_state}{c}"
                f"{_b(r.from_transaction_check)}{FIELD_SPLITOR}")
    return (f"Recall{c}{r.timestamp}{c}{r.region_id}{c}{r.group}{c}{r.topic}{c}{r.msg_id}{c}"
            f"{_b(r.success)}{FIELD_SPLITOR}")


def keys_of(msg_id: str, keys: str | None) -> list[str]:
    """The keys a trace message gets for a record: its message id and each of its keys."""
    found = [msg_id]
    if keys:
        found.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    return found


def record_keys(record: TraceRecord) -> list[str]:
    """`keys_of` a record (a Recall has no keys)."""
    return keys_of(record.msg_id, getattr(record, "keys", None))


@dataclass(frozen=True, slots=True)
class TraceBatch:
    """The body and KEYS of one trace message."""

    body: bytes
    keys: tuple[str, ...]


def encode_batch(records: Iterable[TraceRecord]) -> TraceBatch:
    """Records laid end to end, with the union of their keys (in first-seen order)."""
    parts: list[str] = []
    keys: dict[str, None] = {}
    for record in records:
        parts.append(encode(record))
        keys.update(dict.fromkeys(record_keys(record)))
    return TraceBatch("".join(parts).encode("utf-8"), tuple(keys))


# ---------------------------------------------------------------------------- decoding


def java_split(text: str, sep: str) -> list[str]:
    """`String.split` on one character: trailing empty strings are dropped."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _opt(text: str) -> str | None:
    return None if text == _NULL else text


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"trace record: {what} is not a number: {text!r}") from None


def _msg_type(text: str) -> MessageType:
    try:
        return MessageType(_int(text, "msgType"))
    except ValueError:
        raise ProtocolError(f"trace record: unknown msgType ordinal {text}") from None


def _need(line: Sequence[str], count: int) -> None:
    if len(line) < count:
        raise ProtocolError(f"trace record {line[0]}: {len(line)} fields, at least {count} "
                            "expected")


def decode_record(text: str) -> TraceRecord | None:
    """One record (without its FIELD_SPLITOR); None for a type this reader does not know.

    Raises:
        ProtocolError: a known type with missing or malformed fields.
    """
    f = java_split(text, CONTENT_SPLITOR)
    kind = f[0]
    if kind == "Pub":
        _need(f, 13)
        offset_msg_id, success, client = (None, f[12], None) if len(f) == 13 else (
            _opt(f[12]), f[13], f[14] if len(f) >= 15 else None)
        return PubRecord(_int(f[1], "timestamp"), f[2], f[3], f[4], f[5], _opt(f[6]),
                         _opt(f[7]), f[8], _int(f[9], "bodyLength"), _int(f[10], "costTime"),
                         _msg_type(f[11]), offset_msg_id, _bool(success), client)
    if kind == "SubBefore":
        _need(f, 8)
        return SubBeforeRecord(_int(f[1], "timestamp"), _opt(f[2]), f[3], f[4], f[5],
                               _int(f[6], "retryTimes"), _opt(f[7]))
    if kind == "SubAfter":
        _need(f, 6)
        code = _int(f[6], "contextCode") if len(f) >= 7 else None
        timestamp, group = (_int(f[7], "timestamp"), f[8]) if len(f) >= 9 else (None, None)
        return SubAfterRecord(f[1], f[2], _int(f[3], "costTime"), _bool(f[4]), _opt(f[5]),
                              code, timestamp, group)
    if kind == "EndTransaction":
        _need(f, 13)
        if f[11] not in TRANSACTION_STATES:
            raise ProtocolError(f"trace record: unknown transaction state {f[11]!r}")
        return EndTransactionRecord(_int(f[1], "timestamp"), f[2], f[3], f[4], f[5],
                                    _opt(f[6]), _opt(f[7]), f[8], _msg_type(f[9]),
                                    _opt(f[10]), f[11], _bool(f[12]))
    if kind == "Recall":
        _need(f, 7)
        return RecallRecord(_int(f[1], "timestamp"), f[2], f[3], f[4], f[5], _bool(f[6]))
    return None


@dataclass(frozen=True, slots=True)
class DecodedTraces:
    records: list[TraceRecord]
    malformed: int  # records of a known type that did not decode (skipped)


def decode(data: str | bytes) -> DecodedTraces:
    """Every record of a trace message body (`decoderFromTraceDataString`), skipping
    records of unknown types and counting malformed ones instead of failing them all."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    records: list[TraceRecord] = []
    malformed = 0
    if not text:
        return DecodedTraces(records, 0)
    for part in java_split(text, FIELD_SPLITOR):
        if not part:
            continue
        try:
            record = decode_record(part)
        except ProtocolError:
            malformed += 1
            continue
        if record is not None:
            records.append(record)
    return DecodedTraces(records, malformed)
