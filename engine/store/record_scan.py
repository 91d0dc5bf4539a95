"""Validate a commit-log record in place and extract what dispatch needs.

The equivalent of CommitLog.checkMessageAndReturnSize.

Used by recovery, by the reput scan and by the offline inspector; it relies only on the
on-disk layout declared in `engine.protocol.message`.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass

from engine.protocol.message import (
    BLANK_MAGIC,
    CRC32,
    HEADS,
    INT32,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    POS_SYSFLAG,
    PROPERTIES_LENGTH,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SIZE_MAGIC,
    TOPIC_LENGTH,
    TOPIC_LENGTH_V2,
    property_value,
    tags_hash_code,
)
from engine.store.results import DispatchRequest

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x TimerMessageStore.TIMER_TOPIC
# Topic names the broker accepts (TopicValidator); a torn tail shows up as zeros here.
VALID_TOPIC = re.compile(rb"[%|a-zA-Z0-9_-]+")

Buffer = bytes | bytearray | mmap.mmap


@dataclass(frozen=True, slots=True)
class ScanResult:
    """`request` for a valid record, `blank` for the end-of-file record, else invalid."""

    size: int  # record size (or remaining bytes for a blank); 0 when invalid
    request: DispatchRequest | None = None
    blank: bool = False
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.request is not None or self.blank


def compute_tags_code(
    topic: str, props: str, store_timestamp: int, delay_table: dict[int, int] | None
) -> int:
    """Consume-queue tags code; for SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer the
    delivery timestamp (the timer's TIMER_OUT_MS: the timer service needs nothing else)."""
    if topic == TIMER_TOPIC:
        out = property_value(props, PROPERTY_TIMER_OUT_MS)
        if out and out.lstrip("-").isdigit():
            return int(out)
    if delay_table and topic == SCHEDULE_TOPIC:
        level_text = property_value(props, PROPERTY_DELAY_TIME_LEVEL)
        if level_text and level_text.lstrip("-").isdigit():
            level = min(int(level_text), max(delay_table))
            if level > 0:
                return store_timestamp + delay_table[level]
    return tags_hash_code(property_value(props, PROPERTY_TAGS))


def scan_record(
    buf: Buffer,
    pos: int,
    limit: int,
    file_from_offset: int,
    *,
    check_crc: bool = True,
    delay_table: dict[int, int] | None = None,
) -> ScanResult:
    """Check the record at `buf[pos:]` (segment-relative) without trusting any field."""
    if pos + 8 > limit:
        return ScanResult(0, reason="fewer than 8 bytes left")
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return ScanResult(total, blank=True)
    if magic != MESSAGE_MAGIC and magic != MESSAGE_MAGIC_V2:
        return ScanResult(0, reason=f"bad magic 0x{magic:08X}")
    if total < HEADS[0].size or pos + total > limit:
        return ScanResult(0, reason=f"size {total} out of range")
    (sysflag,) = INT32.unpack_from(buf, pos + POS_SYSFLAG)
    head = HEADS[(sysflag & 0x30) >> 4]
    if total < head.size:
        return ScanResult(0, reason=f"size {total} below head size")
    (
        _, _, crc, queue_id, _flag, queue_offset, phys, _, _born_ts,
        _bip, _bport, store_ts, _sip, _sport, _reconsume, prepared, nb,
    ) = head.unpack_from(buf, pos)  # fmt: skip
    end = pos + total
    p = pos + head.size
    if nb < 0 or p + nb > end:
        return ScanResult(0, reason=f"body length {nb} out of range")
    if check_crc and CRC32(buf[p : p + nb]) & 0x7FFFFFFF != crc:
        return ScanResult(0, reason="body CRC mismatch")
    p += nb
    if magic == MESSAGE_MAGIC:
        if p + 1 > end:
            return ScanResult(0, reason="truncated topic length")
        (nt,) = TOPIC_LENGTH.unpack_from(buf, p)
        p += 1
    else:
        if p + 2 > end:
            return ScanResult(0, reason="truncated topic length")
        (nt,) = TOPIC_LENGTH_V2.unpack_from(buf, p)
        p += 2
    if nt < 0 or p + nt + 2 > end:
        return ScanResult(0, reason=f"topic length {nt} out of range")
    topic_b = bytes(buf[p : p + nt])
    if VALID_TOPIC.fullmatch(topic_b) is None:
        return ScanResult(0, reason=f"invalid topic {topic_b[:32]!r}")
    topic = topic_b.decode()
    p += nt
    (np_,) = PROPERTIES_LENGTH.unpack_from(buf, p)
    p += 2
    if np_ < 0 or p + np_ != end:
        return ScanResult(0, reason=f"length mismatch: TOTALSIZE {total}, fields end at {p + np_}")
    if phys != file_from_offset + pos:
        return ScanResult(0, reason=f"physical offset {phys} != position {file_from_offset + pos}")
    props_b = bytes(buf[p:end])
    if b"\x00" in props_b:
        return ScanResult(0, reason="NUL byte in properties")
    props = props_b.decode(errors="replace") if np_ else ""
    req = DispatchRequest(
        topic, queue_id, phys, total,
        compute_tags_code(topic, props, store_ts, delay_table),
        store_ts, queue_offset,
        property_value(props, PROPERTY_KEYS) or "",
        property_value(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        sysflag, prepared,
    )  # fmt: skip
    return ScanResult(total, request=req)
