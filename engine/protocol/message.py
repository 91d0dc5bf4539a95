"""The RocketMQ message record codec: stored/pulled record layout, properties, flags and ids.

How this works: one byte layout (message-format.md §1) is used in commit-log files, in
PULL/QUERY/VIEW responses and in HA replication.  It is declared here once:

    offset  size      field
    ------  --------  -----------------------------------------------------------------
         0  4         TOTALSIZE        whole record length, this field included
         4  4         MAGICCODE        MESSAGE_MAGIC (0xDAA320A7); BLANK_MAGIC ends a file
         8  4         BODYCRC          zlib.crc32(body) & 0x7FFFFFFF
        12  4         QUEUEID
        16  4         FLAG             user flag
        20  8         QUEUEOFFSET      logical offset in the consume queue
        28  8         PHYSICALOFFSET   commit-log offset of this record
        36  4         SYSFLAG          see the *_FLAG / TRANSACTION_* constants
        40  8         BORNTIMESTAMP    ms
        48  8 | 20    BORNHOST         IPv4 (4) or IPv6 (16, BORNHOST_V6_FLAG) + int32 port
         .  8         STORETIMESTAMP   ms
         .  8 | 20    STOREHOST        IPv4 or IPv6 (STOREHOST_V6_FLAG) + int32 port
         .  4         RECONSUMETIMES
         .  8         PREPARED TX OFFSET
         .  4 + n     BODY             int32 length, then the body
         .  1 + t     TOPIC            int8 length, then UTF-8
         .  2 + p     PROPERTIES       int16 length, then UTF-8 (name \\x01 value \\x02 ...)

    total = 91 + n + t + p   (+12 per IPv6 host)

The fixed head (offsets 0..BODY length) is one precompiled `struct.Struct` per host-width
combination, so encoding is one `pack_into` plus three slice copies.  Decoding keeps the
properties raw (`MessageRecord.properties_raw`) until someone asks for them.
This module does no I/O.
"""

from __future__ import annotations

import ipaddress
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import mul
from typing import Any, NamedTuple

from engine.protocol import native
from engine.protocol.errors import BodyError

CRC32: Callable[..., int] = zlib.crc32
"""CRC-32/IEEE (java.util.zip.CRC32); ISA-L's (same values, ~5x faster) when `isal` is installed."""
try:  # optional accelerator
    from isal.isal_zlib import crc32 as _isal_crc32

    CRC32 = _isal_crc32
except ImportError:  # pragma: no cover - depends on the environment
    pass

# ------------------------------------------------------------------------------ constants

MESSAGE_MAGIC = 0xDAA320A7  # V1 record (-626843481 as a Java int)
MESSAGE_MAGIC_V2 = 0xDAA320AB  # 5.x V2 record: 2-byte topic length (decoded, never written)
BLANK_MAGIC = 0xCBD43194  # end-of-file blank record (-875286124 as a Java int)

# SYSFLAG bits (MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

# Properties string separators and well-known keys (MessageConst)
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
# Timer messages (RocketMQ 5 "delay at any time", MessageConst.PROPERTY_TIMER_*).
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
KEY_SEPARATOR = " "
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
# 5.x POP: a popped message's receipt (`engine.protocol.receipt`) and its first pop time.
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"

MAX_TOPIC_LENGTH = 127  # V1 records hold the topic length in one signed byte
MAX_PROPERTIES_LENGTH = 32767  # int16

# --------------------------------------------------------------------------- the layout

# Record head up to and including the BODY length, one Struct per (born v6, store v6).
_HEAD_PREFIX = (
    ">"
    "i"  # TOTALSIZE
    "I"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
)
_HOST_V4 = "4si"  # IPv4 address bytes + int32 port
_HOST_V6 = "16si"  # IPv6 address bytes + int32 port
_HEAD_SUFFIX = (
    "i"  # RECONSUMETIMES
    "q"  # PREPARED TRANSACTION OFFSET
    "i"  # BODY length
)


def _head(born: str, store: str) -> struct.Struct:
    return struct.Struct(_HEAD_PREFIX + born + "q" + store + _HEAD_SUFFIX)  # "q" = STORETIMESTAMP


HEAD_V4_V4 = _head(_HOST_V4, _HOST_V4)
HEAD_V6_V4 = _head(_HOST_V6, _HOST_V4)
HEAD_V4_V6 = _head(_HOST_V4, _HOST_V6)
HEAD_V6_V6 = _head(_HOST_V6, _HOST_V6)
assert HEAD_V4_V4.size == 88
assert HEAD_V6_V4.size == 100
assert HEAD_V4_V6.size == 100
assert HEAD_V6_V6.size == 112

# Indexed by (sysflag & 0x30) >> 4: bit 0 = born host v6, bit 1 = store host v6.
HEADS: tuple[struct.Struct, ...] = (HEAD_V4_V4, HEAD_V6_V4, HEAD_V4_V6, HEAD_V6_V6)

# The fields every reader needs first: TOTALSIZE, MAGICCODE.
SIZE_MAGIC = struct.Struct(">iI")
assert SIZE_MAGIC.size == 8
# The 8-byte end-of-file blank record: int32 remaining bytes of the file, BLANK_MAGIC.
BLANK_RECORD = SIZE_MAGIC
BLANK_RECORD_SIZE = 8

TOPIC_LENGTH = struct.Struct(">b")  # int8 topic length (V1)
assert TOPIC_LENGTH.size == 1
TOPIC_LENGTH_V2 = struct.Struct(">h")  # int16 topic length (5.x V2)
assert TOPIC_LENGTH_V2.size == 2
PROPERTIES_LENGTH = struct.Struct(">h")  # int16 properties length
assert PROPERTIES_LENGTH.size == 2
INT32 = struct.Struct(">i")
assert INT32.size == 4
INT64 = struct.Struct(">q")
assert INT64.size == 8

# Fixed positions used by readers (IPv4 born host where it matters).
POS_TOTAL_SIZE = 0
POS_MAGIC = 4
POS_BODY_CRC = 8
POS_QUEUE_ID = 12
POS_FLAG = 16
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYSFLAG = 36
POS_BORN_TIMESTAMP = 40
POS_BORN_HOST = 48

# Offset message id: IP bytes + int32 port + int64 physical offset, upper-case hex.
MSG_ID_V4 = struct.Struct(">4siq")
assert MSG_ID_V4.size == 16
MSG_ID_V6 = struct.Struct(">16siq")
assert MSG_ID_V6.size == 28

# Batch body item head: TOTALSIZE, MAGICCODE (0), BODYCRC (0), FLAG, BODY length.
BATCH_ITEM_HEAD = struct.Struct(">iiiii")
assert BATCH_ITEM_HEAD.size == 20

Address = tuple[str, int]
"""A host as (IP text, port)."""


class RecordError(BodyError):
    """Bytes that are not a valid message record (or batch body)."""


# ------------------------------------------------------------------------------ values


class BrokerMessage(NamedTuple):
    """A message as the broker hands it to the store (MessageExtBrokerInner).

    `properties` is the raw properties string; the store derives tags code and index keys
    from it.  `store_host` None means the store's own address.  An immutable NamedTuple
    rather than a frozen dataclass: one is made per send, on the hot path (a third of the
    cost); copy with changes via `_replace`.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: str = ""
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    store_host: Address | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """A SEND_BATCH_MESSAGE as the broker hands it to the store (MessageExtBatch).

    `body` is the batch body of message-format.md §4; `properties` are the batch-wide
    properties appended to every inner message's properties.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    properties: str = ""
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    store_host: Address | None = None
    reconsume_times: int = 0


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One message of a batch body."""

    flag: int
    body: bytes
    properties: str


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A decoded record; properties stay raw until `properties()` is called."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sysflag: int
    born_timestamp: int
    born_host: Address
    store_timestamp: int
    store_host: Address
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes

    def properties(self) -> dict[str, str]:
        """The properties as a dict (parsed on each call)."""
        return string_to_properties(self.properties_raw.decode())

    @property
    def tags(self) -> str | None:
        return self.properties().get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        text = self.properties().get(PROPERTY_KEYS, "")
        return [k for k in text.split(KEY_SEPARATOR) if k]

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.store_host, self.physical_offset)

    @property
    def msg_id(self) -> str:
        """`UNIQ_KEY` if present, else the offset message id (MessageClientExt.getMsgId)."""
        return self.properties().get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id


def message_from_record(record: MessageRecord, *, topic: str, queue_id: int,
                        properties: str, **changes: Any) -> BrokerMessage:
    """A stored record put again (delay delivery, retry, commit, check-back): the same body,
    flag, sysflag, hosts, born time, reconsume times and prepared offset, unless `changes`
    (BrokerMessage fields) say otherwise."""
    msg = BrokerMessage(
        topic=topic, body=record.body, queue_id=queue_id, flag=record.flag,
        properties=properties, sysflag=record.sysflag, born_timestamp=record.born_timestamp,
        born_host=record.born_host, store_host=record.store_host,
        reconsume_times=record.reconsume_times,
        prepared_transaction_offset=record.prepared_transaction_offset)
    return msg._replace(**changes) if changes else msg


# -------------------------------------------------------------------------- properties


def properties_to_string(props: Mapping[str, str | None]) -> str:
    """Encode properties as `name\\x01value` pairs joined by `\\x02` (no trailing `\\x02`)."""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


def string_to_properties(text: str) -> dict[str, str]:
    """Decode a properties string; tolerant of a trailing `\\x02` and malformed pairs."""
    out: dict[str, str] = {}
    if not text:
        return out
    for segment in text.split(PROPERTY_SEPARATOR):
        i = segment.find(NAME_VALUE_SEPARATOR)
        if i <= 0 or i == len(segment) - 1:
            continue
        out[segment[:i]] = segment[i + 1 :]
    return out


def property_value(text: str, name: str) -> str | None:
    """One property's value from a raw properties string without building a dict."""
    if not text:
        return None
    needle = name + NAME_VALUE_SEPARATOR
    start = 0
    value: str | None = None
    while True:
        i = text.find(needle, start)
        if i < 0:
            return value
        if i == 0 or text[i - 1] == PROPERTY_SEPARATOR:
            j = text.find(PROPERTY_SEPARATOR, i)
            end = len(text) if j < 0 else j
            v = text[i + len(needle) : end]
            if v:
                value = v  # later duplicates win, as in the dict decoder
        start = i + 1


# ------------------------------------------------------------------------ tags / hash

_POW31: list[int] = [1]
_POWERS: dict[int, tuple[int, ...]] = {}


def _powers(n: int) -> tuple[int, ...]:
    """(31^(n-1), ..., 31^0) modulo 2^32, cached per length."""
    p = _POWERS.get(n)
    if p is None:
        while len(_POW31) < n:
            _POW31.append((_POW31[-1] * 31) & 0xFFFFFFFF)
        p = _POWERS[n] = tuple(_POW31[n - 1 :: -1]) if n else ()
    return p


def java_string_hash(text: str) -> int:
    """Java `String.hashCode()` (over UTF-16 code units) as a signed int32."""
    fast = native.string_hash
    if fast is not None:
        code = fast(text)
        if code is not None:
            return code
    units: bytes | array[int]
    if text.isascii():
        units = text.encode()
    else:
        arr = array("H", text.encode("utf-16-le"))
        if sys.byteorder == "big":
            arr.byteswap()
        units = arr
    n = len(units)
    h: int = sum(map(mul, units, _powers(n))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=8192)
def tags_hash_code(tags: str | None) -> int:
    """Consume-queue tags code: `String.hashCode(TAGS)`, 0 without tags."""
    if not tags:
        return 0
    return java_string_hash(tags)


# ------------------------------------------------------------------------------ hosts


@lru_cache(maxsize=1024)
def pack_ip(ip: str) -> bytes:
    """IP text to its 4 or 16 address bytes."""
    return ipaddress.ip_address(ip).packed


@lru_cache(maxsize=1024)
def unpack_ip(raw: bytes) -> str:
    """4 or 16 address bytes to IP text."""
    return str(ipaddress.ip_address(raw))


def host_sysflag(born_host: Address, store_host: Address) -> int:
    """The BORNHOST_V6_FLAG / STOREHOST_V6_FLAG bits for two hosts."""
    flags = 0
    if len(pack_ip(born_host[0])) == 16:
        flags |= BORNHOST_V6_FLAG
    if len(pack_ip(store_host[0])) == 16:
        flags |= STOREHOST_V6_FLAG
    return flags


def record_length(sysflag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """TOTALSIZE of a V1 record (calMsgLength)."""
    return HEADS[(sysflag & 0x30) >> 4].size + body_len + 1 + topic_len + 2 + props_len


def body_crc(body: bytes) -> int:
    """BODYCRC: CRC32 of the body, masked to a non-negative int32."""
    return CRC32(body) & 0x7FFFFFFF


# -------------------------------------------------------------------------------- encode


def encode_into(
    buf: bytearray | memoryview,
    pos: int,
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sysflag: int = 0,
    born_timestamp: int = 0,
    born_host: Address = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: Address = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> int:
    """Write one record at `buf[pos:]`; the host v6 bits of `sysflag` are set from the hosts.

    Returns:
        The record length (TOTALSIZE).

    Raises:
        RecordError: topic longer than 127 bytes or properties longer than 32767 bytes.
    """
    if len(topic) > MAX_TOPIC_LENGTH:
        raise RecordError(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_LENGTH}")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise RecordError(f"properties of {len(properties)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    born_ip = pack_ip(born_host[0])
    store_ip = pack_ip(store_host[0])
    sysflag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if len(born_ip) == 16:
        sysflag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sysflag |= STOREHOST_V6_FLAG
    head = HEADS[(sysflag & 0x30) >> 4]
    hs = head.size
    nb, nt, np_ = len(body), len(topic), len(properties)
    total = hs + nb + 1 + nt + 2 + np_
    head.pack_into(
        buf, pos, total, MESSAGE_MAGIC, body_crc(body) if crc is None else crc,
        queue_id, flag, queue_offset, physical_offset, sysflag, born_timestamp,
        born_ip, born_host[1], store_timestamp, store_ip, store_host[1],
        reconsume_times, prepared_transaction_offset, nb,
    )  # fmt: skip
    p = pos + hs
    buf[p : p + nb] = body
    p += nb
    buf[p] = nt
    buf[p + 1 : p + 1 + nt] = topic
    p += 1 + nt
    PROPERTIES_LENGTH.pack_into(buf, p, np_)
    buf[p + 2 : p + 2 + np_] = properties
    return total


def encode_record(
    *,
    topic: str,
    body: bytes,
    properties: str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sysflag: int = 0,
    born_timestamp: int = 0,
    born_host: Address = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: Address = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """Encode one record to bytes (see `encode_into`)."""
    tb = topic.encode()
    pb = properties.encode()
    sysflag = (sysflag & ~0x30) | host_sysflag(born_host, store_host)
    buf = bytearray(record_length(sysflag, len(body), len(tb), len(pb)))
    encode_into(
        buf, 0, topic=tb, body=body, properties=pb, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sysflag=sysflag,
        born_timestamp=born_timestamp, born_host=born_host, store_timestamp=store_timestamp,
        store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
    )  # fmt: skip
    return bytes(buf)


# -------------------------------------------------------------------------------- decode


def decode_record(data: bytes, pos: int = 0, *, check_crc: bool = False) -> MessageRecord:
    """Decode the record starting at `data[pos]`.

    Raises:
        RecordError: bad magic, truncated record, inconsistent lengths or (if asked) bad CRC.
    """
    end = len(data)
    if pos + 8 > end:
        raise RecordError("truncated record: fewer than 8 bytes")
    total, magic = SIZE_MAGIC.unpack_from(data, pos)
    if magic != MESSAGE_MAGIC and magic != MESSAGE_MAGIC_V2:
        raise RecordError(f"bad magic code 0x{magic:08X} at {pos}")
    if total < HEAD_V4_V4.size or pos + total > end:
        raise RecordError(f"record size {total} at {pos} does not fit in {end - pos} bytes")
    (sysflag,) = INT32.unpack_from(data, pos + POS_SYSFLAG)
    head = HEADS[(sysflag & 0x30) >> 4]
    if total < head.size:
        raise RecordError(f"record size {total} smaller than its head")
    (
        _, _, crc, queue_id, flag, queue_offset, physical_offset, _, born_ts,
        born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, nb,
    ) = head.unpack_from(data, pos)  # fmt: skip
    p = pos + head.size
    limit = pos + total
    if nb < 0 or p + nb > limit:
        raise RecordError(f"body length {nb} overruns the record")
    body = bytes(data[p : p + nb])
    p += nb
    if magic == MESSAGE_MAGIC_V2:
        if p + 2 > limit:
            raise RecordError("truncated topic length")
        (nt,) = TOPIC_LENGTH_V2.unpack_from(data, p)
        p += 2
    else:
        if p + 1 > limit:
            raise RecordError("truncated topic length")
        (nt,) = TOPIC_LENGTH.unpack_from(data, p)
        p += 1
    if nt < 0 or p + nt + 2 > limit:
        raise RecordError(f"topic length {nt} overruns the record")
    topic = bytes(data[p : p + nt]).decode(errors="replace")
    p += nt
    (np_,) = PROPERTIES_LENGTH.unpack_from(data, p)
    p += 2
    if np_ < 0 or p + np_ != limit:
        raise RecordError(f"properties length {np_} does not end the record of size {total}")
    props = bytes(data[p : p + np_])
    if check_crc and body_crc(body) != crc:
        raise RecordError(f"body CRC mismatch at {pos}")
    return MessageRecord(
        total, magic, crc, queue_id, flag, queue_offset, physical_offset, sysflag, born_ts,
        (unpack_ip(born_ip), born_port), store_ts, (unpack_ip(store_ip), store_port),
        reconsume, prepared, body, topic, props,
    )  # fmt: skip


def decode_records(data: bytes) -> list[MessageRecord]:
    """Decode records laid back to back (a PULL/QUERY response body)."""
    out: list[MessageRecord] = []
    pos = 0
    while pos < len(data):
        rec = decode_record(data, pos)
        out.append(rec)
        pos += rec.total_size
    return out


# ---------------------------------------------------------------------------------- batch


def decode_batch_body(body: bytes) -> list[BatchItem]:
    """Split a SEND_BATCH_MESSAGE body (message-format.md §4) into its messages.

    Raises:
        RecordError: an item whose lengths do not add up.
    """
    return [BatchItem(f, b, p) for f, b, p in iter_batch_items(body)]


def iter_batch_items(body: bytes) -> list[tuple[int, bytes, str]]:
    """`decode_batch_body` as plain (flag, body, properties) tuples (the store's hot path).

    Raises:
        RecordError: an item whose lengths do not add up.
    """
    out: list[tuple[int, bytes, str]] = []
    pos, end = 0, len(body)
    while pos < end:
        if pos + 20 > end:
            raise RecordError(f"truncated batch item head at {pos}")
        total, _magic, _crc, flag, nb = BATCH_ITEM_HEAD.unpack_from(body, pos)
        p = pos + 20
        if nb < 0 or p + nb + 2 > end:
            raise RecordError(f"batch item body length {nb} overruns the batch at {pos}")
        data = body[p : p + nb]
        p += nb
        (np_,) = PROPERTIES_LENGTH.unpack_from(body, p)
        p += 2
        if np_ < 0 or p + np_ > end:
            raise RecordError(f"batch item properties length {np_} overruns the batch")
        try:
            props = body[p : p + np_].decode()
        except UnicodeDecodeError:
            raise RecordError(f"batch item {len(out)}: properties are not UTF-8") from None
        p += np_
        if total != p - pos:
            raise RecordError(f"batch item size {total} != {p - pos} at {pos}")
        out.append((flag, data, props))
        pos = p
    return out


def encode_batch_body(items: Iterable[BatchItem]) -> bytes:
    """Build a batch body as `MessageDecoder.encodeMessages` does."""
    parts: list[bytes] = []
    for item in items:
        pb = item.properties.encode()
        total = 20 + len(item.body) + 2 + len(pb)
        parts.append(BATCH_ITEM_HEAD.pack(total, 0, 0, item.flag, len(item.body)))
        parts.append(item.body)
        parts.append(PROPERTIES_LENGTH.pack(len(pb)))
        parts.append(pb)
    return b"".join(parts)


# ----------------------------------------------------------------------------------- ids


def create_offset_msg_id(store_host: Address, physical_offset: int) -> str:
    """Offset message id: upper-case hex of store IP + int32 port + int64 offset."""
    ip = pack_ip(store_host[0])
    s = MSG_ID_V4 if len(ip) == 4 else MSG_ID_V6
    return s.pack(ip, store_host[1], physical_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[Address, int]:
    """Inverse of `create_offset_msg_id`: ((ip, port), physical offset).

    Raises:
        RecordError: not 32 (IPv4) or 56 (IPv6) hex characters.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise RecordError(f"message id {msg_id!r} is not hex") from None
    if len(raw) == 16:
        ip, port, offset = MSG_ID_V4.unpack(raw)
    elif len(raw) == 28:
        ip, port, offset = MSG_ID_V6.unpack(raw)
    else:
        raise RecordError(f"message id {msg_id!r} has {len(msg_id)} hex digits, not 32 or 56")
    return (unpack_ip(ip), port), offset
