"""Checkpoint and ack records as 5.3 stores them in the revive topic (`PopCheckPoint`, `AckMsg`).

How this works: a POP writes one checkpoint (tag `ck`) per queue it popped from: the queue,
the offset the pop started at (`so`), the popped messages as offsets relative to it (`d`), when
it popped (`pt`) and for how long the messages stay invisible (`it`).  An ACK writes an ack
(tag `ack`, one offset) or a batch ack (tag `bAck`, offset list `aol`) naming the checkpoint
by (topic, group, queue, start offset, pop time, broker name).  The bodies are fastjson text
with 5.3's short keys; 5.3 also writes the checkpoint's `reviveTime` (a getter) and reads an
ack's long names, so both are accepted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.broker.pop.names import ACK_TAG, BATCH_ACK_TAG, CK_TAG, SPLIT
from engine.protocol.errors import BodyError

#: What names a checkpoint: (topic, group, queue id, start offset, pop time, broker name).
CkKey = tuple[str, str, int, int, int, str]


@dataclass(frozen=True, slots=True)
class PopCheckPoint:
    topic: str
    cid: str  # the consumer group
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    #: Popped offsets relative to `start_offset`; empty in pre-4.9.3 checkpoints (consecutive).
    queue_offset_diff: tuple[int, ...] = ()
    bit_map: int = 0
    broker_name: str = ""
    revive_offset: int = 0
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> CkKey:
        return (self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time,
                self.broker_name)

    def offsets(self) -> list[int]:
        """The queue offsets of the popped messages, in pop order."""
        return [self.ack_offset_by_index(i) for i in range(self.num)]

    def index_of_ack(self, ack_offset: int) -> int:
        """The bit of `ack_offset` in this checkpoint, -1 when it is not one of its messages."""
        diff = ack_offset - self.start_offset
        if diff < 0:
            return -1
        if not self.queue_offset_diff:
            return diff if diff < self.num else -1
        try:
            return self.queue_offset_diff.index(diff)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def unique_id(self) -> str:
        """The UNIQ_KEY of its revive record (`PopMessageProcessor.genCkUniqueId`)."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.start_offset), self.cid,
                           str(self.pop_time), self.broker_name, CK_TAG))

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "bm": self.bit_map, "bn": self.broker_name, "c": self.cid,
            "d": list(self.queue_offset_diff), "it": self.invisible_time, "n": self.num,
            "pt": self.pop_time, "q": self.queue_id, "reviveTime": self.revive_time,
            "ro": self.revive_offset, "so": self.start_offset, "t": self.topic}
        if self.re_put_times is not None:
            doc["rp"] = self.re_put_times
        return orjson.dumps(doc)

    @classmethod
    def from_json(cls, raw: bytes) -> PopCheckPoint:
        """Raises BodyError: not a checkpoint."""
        doc = _object(raw)
        try:
            topic, cid = doc["t"], doc["c"]
            if not isinstance(topic, str) or not isinstance(cid, str):
                raise BodyError("checkpoint without topic or group")
            diff = doc.get("d") or []
            return cls(topic, cid, int(doc.get("q", 0)), int(doc.get("so", 0)),
                       int(doc.get("pt", 0)), int(doc.get("it", 0)), int(doc.get("n", 0)),
                       tuple(int(d) for d in diff), int(doc.get("bm", 0)),
                       str(doc.get("bn") or ""), int(doc.get("ro", 0)),
                       None if doc.get("rp") is None else str(doc["rp"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise BodyError(f"checkpoint {raw[:120]!r} does not decode: {exc}") from None


@dataclass(frozen=True, slots=True)
class AckMsg:
    """An ack of one message (`ack_offset`), or with `ack_offset_list` a batch ack (5.3
    `BatchAckMsg`, whose `ack_offset` is -1)."""

    topic: str
    consumer_group: str
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str
    ack_offset: int = -1
    ack_offset_list: tuple[int, ...] = field(default=())

    @property
    def is_batch(self) -> bool:
        return bool(self.ack_offset_list)

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.is_batch else ACK_TAG

    @property
    def ck_key(self) -> CkKey:
        return (self.topic, self.consumer_group, self.queue_id, self.start_offset,
                self.pop_time, self.broker_name)

    def offsets(self) -> tuple[int, ...]:
        return self.ack_offset_list if self.is_batch else (self.ack_offset,)

    def unique_id(self) -> str:
        """`genAckUniqueId`, also for a batch ack: 5.3 sets `genBatchAckUniqueId` and then
        overwrites it with this, so its batch-ack records end in "@-1@...@ack" too."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.ack_offset),
                           self.consumer_group, str(self.pop_time), self.broker_name, ACK_TAG))

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "ao": self.ack_offset, "bn": self.broker_name, "c": self.consumer_group,
            "pt": self.pop_time, "q": self.queue_id, "so": self.start_offset, "t": self.topic}
        if self.is_batch:
            doc = {"aol": list(self.ack_offset_list), **doc}
        return orjson.dumps(doc)

    @classmethod
    def from_json(cls, raw: bytes) -> AckMsg:
        """Raises BodyError: not an ack."""
        doc = _object(raw)

        def get(short: str, long: str, default: Any = None) -> Any:
            value = doc.get(short)
            return doc.get(long, default) if value is None else value

        try:
            topic, group = get("t", "topic"), get("c", "consumerGroup")
            if not isinstance(topic, str) or not isinstance(group, str):
                raise BodyError("ack without topic or group")
            listed = get("aol", "ackOffsetList") or []
            return cls(topic, group, int(get("q", "queueId", 0)), int(get("so", "startOffset", 0)),
                       int(get("pt", "popTime", 0)), str(get("bn", "brokerName") or ""),
                       int(get("ao", "ackOffset", -1)), tuple(int(o) for o in listed))
        except (TypeError, ValueError) as exc:
            raise BodyError(f"ack {raw[:120]!r} does not decode: {exc}") from None


def _object(raw: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"revive record {raw[:120]!r} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BodyError(f"revive record {raw[:120]!r} is not a JSON object")
    return doc
