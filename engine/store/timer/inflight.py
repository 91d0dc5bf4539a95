"""The slots being delivered: their timers in order of the time each asked for.

How this works (docs/timers.md, "How it runs"): a slot is *taken* when its time begins: its
units become `Due` entries in one heap, keyed by the exact time each timer asked for (within
the slot's precision), and the slot stays *open* until its window has passed and its last
timer is delivered.  A timer that reaches the wheel after its slot was taken joins the open
slot (its unit is chained there too), so that it is still delivered at its time and a
restart still finds it.  The oldest open slot is what the checkpoint may call "delivered up
to"; the commit log's end when it was taken is where recovery looks for deliveries.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

from engine.protocol.message import MessageRecord

KEEP_RECORDS = 16_384  # records kept from take to delivery; beyond, read again when due


class Due(NamedTuple):
    """A timer to deliver (ordered by `at`, then `seq`: store order within a time)."""

    at: int          # the time it asked for (ms)
    seq: int
    slot: int        # the slot whose chain holds its unit
    offset_py: int
    size_py: int
    enqueue_ms: int


class OpenSlot:
    __slots__ = ("phy", "remaining")

    def __init__(self, phy: int) -> None:
        self.phy = phy          # commit-log end when the slot was taken
        self.remaining = 0      # its timers not yet delivered


class InFlight:
    """Open slots and the heap of their undelivered timers."""

    def __init__(self, precision_ms: int) -> None:
        self.precision = precision_ms
        self.slots: dict[int, OpenSlot] = {}
        self.heap: list[Due] = []
        self.records: dict[int, MessageRecord] = {}  # seq -> its parked record, read once
        self._seq = 0

    def __len__(self) -> int:
        return len(self.heap)

    def open(self, slot_ms: int, phy: int) -> None:
        self.slots.setdefault(slot_ms, OpenSlot(phy))

    def newest_open(self) -> int | None:
        return max(self.slots) if self.slots else None

    def oldest_open(self) -> int | None:
        return min(self.slots) if self.slots else None

    def add(self, at: int, slot_ms: int, offset_py: int, size_py: int, enqueue_ms: int,
            record: MessageRecord | None) -> None:
        self._seq += 1
        heapq.heappush(self.heap, Due(at, self._seq, slot_ms, offset_py, size_py, enqueue_ms))
        if record is not None and len(self.records) < KEEP_RECORDS:
            self.records[self._seq] = record
        self.slots[slot_ms].remaining += 1

    def next_at(self) -> int | None:
        return self.heap[0].at if self.heap else None

    def pop_due(self, now: int, limit: int) -> list[Due]:
        out: list[Due] = []
        heap = self.heap
        while heap and heap[0].at <= now and len(out) < limit:
            out.append(heapq.heappop(heap))
        return out

    def push_back(self, dues: list[Due]) -> None:
        for due in dues:
            heapq.heappush(self.heap, due)

    def done(self, due: Due) -> None:
        self.records.pop(due.seq, None)
        self.slots[due.slot].remaining -= 1

    def close_passed(self, now: int) -> None:
        """Close the slots whose window has passed and whose timers are all delivered."""
        for slot_ms in sorted(self.slots):
            if self.slots[slot_ms].remaining > 0 or slot_ms + self.precision > now:
                break
            del self.slots[slot_ms]
