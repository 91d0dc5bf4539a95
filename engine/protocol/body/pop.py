"""BATCH_ACK_MESSAGE's body: acks of many popped messages, grouped by checkpoint (5.3 BatchAck).

How this works: one `BatchAck` acknowledges messages of one queue popped under one checkpoint
(`start_offset`, `pop_time`, `revive_queue_id`); which of them is a bit set over offsets
relative to `start_offset`, written as fastjson writes Java's `BitSet.toByteArray()`: a
base64 string of little-endian bytes, trailing zero bytes dropped.  5.3 writes the one- and
two-letter keys below (it also reads the long names; this engine writes and reads the short).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import Topic
from engine.protocol.errors import BodyError
from engine.protocol.wire import Int32, wire_name


def encode_bits(indexes: Iterable[int]) -> str:
    """Java `BitSet.toByteArray()` of the set `indexes`, base64 as fastjson writes bytes."""
    value = 0
    for i in indexes:
        if i < 0:
            raise ValueError(f"bit index {i} < 0")
        value |= 1 << i
    raw = value.to_bytes((value.bit_length() + 7) // 8, "little")
    return base64.b64encode(raw).decode("ascii")


def decode_bits(text: str) -> list[int]:
    """The set indexes of a base64 bit set, ascending."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BodyError(f"bit set {text[:40]!r} is not base64") from None
    value = int.from_bytes(raw, "little")
    return [i for i in range(value.bit_length()) if value >> i & 1]


@dataclass(frozen=True, slots=True)
class BatchAck:
    consumer_group: GroupName = wire_name("c")
    topic: Topic = wire_name("t")
    #: The retry mark of the receipts ("0", "1", "2": `engine.protocol.receipt`).
    retry: str = wire_name("r")
    start_offset: int = wire_name("so")
    queue_id: Int32 = wire_name("q")
    revive_queue_id: Int32 = wire_name("rq")
    pop_time: int = wire_name("pt")
    invisible_time: int = wire_name("it")
    #: Offsets acknowledged, relative to `start_offset` (`encode_bits`).
    bit_set: str = wire_name("b")

    def offsets(self) -> list[int]:
        """The acknowledged queue offsets."""
        return [self.start_offset + i for i in decode_bits(self.bit_set)]


@dataclass(frozen=True, slots=True)
class BatchAckMessageRequestBody:
    broker_name: str | None = None
    acks: list[BatchAck] = field(default_factory=list)
