"""One consume queue: 20-byte entries (physical offset, size, tags code) per logical offset.

    offset  size  field
    ------  ----  ------------------------------------------------------------
         0     8  commit-log physical offset of the message
         8     4  message total size
        12     8  tags code (String.hashCode(TAGS); delivery time for delay queues)

Logical offset n lives at byte n*20 of the queue; files are named by their first byte.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Callable, Sequence

from engine.store.mapped_file import MappedFile
from engine.store.mapped_file_queue import MappedFileQueue
from engine.store.results import DispatchRequest

CQ_ENTRY = struct.Struct(
    ">"
    "q"  # commit-log physical offset
    "i"  # message total size
    "q"  # tags code
)
assert CQ_ENTRY.size == 20
CQ_STORE_UNIT_SIZE = 20
BLANK_ENTRY = CQ_ENTRY.pack(0, 0x7FFFFFFF, 0)  # fillPreBlank

log = logging.getLogger(__name__)


def is_blank_entry(offset: int, size: int) -> bool:
    return offset == 0 and size == 0x7FFFFFFF


class ConsumeQueue:
    """Entries of (topic, queue_id) under `<root>/<topic>/<queue_id>/`."""

    def __init__(self, topic: str, queue_id: int, root: str, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        file_size -= file_size % CQ_STORE_UNIT_SIZE
        self.mfq = MappedFileQueue(os.path.join(root, topic, str(queue_id)), file_size)
        self.max_physic_offset = -1  # end (offset + size) of the last entry written
        self.min_logic_offset = 0  # byte offset of the first live entry
        self.last_store_timestamp = 0

    # ---- offsets
    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset() // CQ_STORE_UNIT_SIZE

    def roll_next_file(self, index: int) -> int:
        per_file = self.mfq.file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    # ---- writes
    def put(self, req: DispatchRequest) -> bool:
        """Write the entry of one dispatched record; idempotent.  False if it was skipped."""
        _topic, _qid, offset, size, tags_code, timestamp, queue_offset, _k, _u, _f, _p = req
        return self.put_entry(offset, size, tags_code, timestamp, queue_offset)

    def put_entry(
        self, offset: int, size: int, tags_code: int, timestamp: int, queue_offset: int
    ) -> bool:
        """`put` from the fields of a request: commit-log offset, size, tags code, store
        time and queue offset."""
        end = offset + size
        if end <= self.max_physic_offset:
            return False
        expect = queue_offset * CQ_STORE_UNIT_SIZE
        files = self.mfq.files
        mf = files[-1] if files else None
        if (
            mf is None
            or mf.file_from_offset + mf.wrote_position != expect
            or mf.wrote_position >= mf.file_size
        ):
            mf = self._position(expect)
            if mf is None:
                return False
        pos = mf.wrote_position
        CQ_ENTRY.pack_into(mf.mm, pos, offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        mf.store_timestamp = timestamp
        self.max_physic_offset = end
        self.last_store_timestamp = timestamp
        return True

    def put_entries(
        self,
        first_queue_offset: int,
        offsets: Sequence[int],
        sizes: Sequence[int],
        tags_codes: Sequence[int],
        timestamp: int,
    ) -> None:
        """`put` for the records of one batch put: consecutive queue offsets from
        `first_queue_offset`, rising physical offsets.  One write of all their entries
        when they follow the last entry in its file."""
        n = len(offsets)
        if not n:
            return
        files = self.mfq.files
        mf = files[-1] if files else None
        if (
            mf is None
            or offsets[0] < self.max_physic_offset
            or mf.file_from_offset + mf.wrote_position != first_queue_offset * CQ_STORE_UNIT_SIZE
            or mf.wrote_position + n * CQ_STORE_UNIT_SIZE > mf.file_size
        ):
            for i in range(n):  # the general path: skips, gaps, new files
                qo = first_queue_offset + i
                self.put_entry(offsets[i], sizes[i], tags_codes[i], timestamp, qo)
            return
        pos = mf.wrote_position
        end = pos + n * CQ_STORE_UNIT_SIZE
        mf.mm[pos:end] = b"".join(map(CQ_ENTRY.pack, offsets, sizes, tags_codes))
        mf.wrote_position = end
        self.max_physic_offset = offsets[-1] + sizes[-1]
        mf.store_timestamp = self.last_store_timestamp = timestamp

    def _position(self, expect: int) -> MappedFile | None:
        """The file to write logical byte offset `expect` to, at its write position.

        A brand-new queue whose first entry is not 0 starts with a file pre-filled with
        blank entries (fillPreBlank).  In an existing queue an entry already written is
        skipped, and a gap (a record whose QUEUEOFFSET jumps ahead, e.g. a corrupt one)
        is written at the current end, as RocketMQ does, keeping the queue dense.
        """
        last = self.mfq.last
        if last is not None:
            current = last.file_from_offset + last.wrote_position
            if expect < current:
                return None  # built repeatedly; the entry is already there
            if expect > current:
                log.warning(
                    "consume queue %s/%d: entry for offset %d written at %d",
                    self.topic, self.queue_id, expect // CQ_STORE_UNIT_SIZE,
                    current // CQ_STORE_UNIT_SIZE,
                )  # fmt: skip
            return self.mfq.get_last()
        mf = self.mfq.get_last(start_offset=expect)
        assert mf is not None
        if expect != 0:
            self.min_logic_offset = expect
            self._fill(mf, expect - mf.file_from_offset)
        return mf

    @staticmethod
    def _fill(mf: MappedFile, pos: int) -> None:
        p = mf.wrote_position
        if p < pos:
            mf.mm[p:pos] = BLANK_ENTRY * ((pos - p) // CQ_STORE_UNIT_SIZE)
        mf.wrote_position = max(p, pos)

    # ---- reads
    def read_entries(self, index: int, max_bytes: int) -> bytes:
        """Raw entries from logical `index` to the end of its file (at most `max_bytes`)."""
        pos = index * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return b""
        mf = self.mfq.find(pos)
        if mf is None:
            return b""
        rel = pos - mf.file_from_offset
        n = min(mf.wrote_position - rel, max_bytes - max_bytes % CQ_STORE_UNIT_SIZE)
        return mf.read(rel, n) if n > 0 else b""

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        data = self.read_entries(index, CQ_STORE_UNIT_SIZE)
        if len(data) < CQ_STORE_UNIT_SIZE:
            return None
        offset, size, tags = CQ_ENTRY.unpack(data)
        return offset, size, tags

    def offset_by_time(self, timestamp: int, store_time: Callable[[int, int], int]) -> int:
        """First logical offset whose message was stored at or after `timestamp` (binary search).

        Returns the max offset when every message is older.
        """
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.get_entry(mid)
            ts = store_time(entry[0], entry[1]) if entry else -1
            if ts < 0 or ts < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # ---- recovery and maintenance
    def load(self) -> None:
        self.mfq.load()

    def recover(self) -> None:
        """Scan from the 3rd-last file to the first invalid entry; truncate there."""
        files = self.mfq.files
        if not files:
            return
        idx = max(0, len(files) - 3)
        process = files[idx].file_from_offset
        max_phys = -1
        for mf in files[idx:]:
            data = mf.read_raw(0, mf.file_size)
            pos = 0
            for pos in range(0, len(data) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                offset, size, _tags = CQ_ENTRY.unpack_from(data, pos)
                if offset < 0 or size <= 0:
                    break
                if not is_blank_entry(offset, size):
                    max_phys = offset + size
            else:
                pos = len(data)
            process = mf.file_from_offset + pos
            if pos < mf.file_size:
                break
        self.max_physic_offset = max_phys
        self.mfq.truncate_dirty(process)
        self.mfq.flushed_where = process
        first = self.mfq.first
        self.min_logic_offset = first.file_from_offset if first else 0

    def recover_to(self, phy_offset: int) -> None:
        """Keep the entries of records ending at or before `phy_offset`, drop the rest.

        Entries rise with their physical offsets and everything before the checkpoint's
        recovery offset is on disk, so a binary search in the last file finds the end:
        the time does not depend on the length of the queue.
        """
        unit = CQ_STORE_UNIT_SIZE

        def kept(mf: MappedFile, n: int) -> bool:
            offset, size, _ = CQ_ENTRY.unpack_from(mf.mm, n * unit)
            return is_blank_entry(offset, size) or (
                offset >= 0 and size > 0 and offset + size <= phy_offset
            )

        files = self.mfq.files
        self.max_physic_offset = -1
        if files:
            i = len(files) - 1
            while i > 0 and not kept(files[i], 0):
                i -= 1
            mf = files[i]
            lo, hi = 0, mf.file_size // unit  # the first entry not kept is in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if kept(mf, mid):
                    lo = mid + 1
                else:
                    hi = mid
            self.mfq.truncate_dirty(mf.file_from_offset + lo * unit)
            self.mfq.flushed_where = self.mfq.max_offset()
            if lo == 0 and i > 0:
                mf, lo = files[i - 1], files[i - 1].file_size // unit
            if lo > 0:  # blank entries only ever come first: the last kept one tells
                offset, size, _ = CQ_ENTRY.unpack_from(mf.mm, (lo - 1) * unit)
                if not is_blank_entry(offset, size):
                    self.max_physic_offset = offset + size
        first = self.mfq.first
        self.min_logic_offset = first.file_from_offset if first else 0

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop entries that point at or past commit-log offset `phy_offset`."""
        while (mf := self.mfq.last) is not None:
            data = mf.read_raw(0, mf.wrote_position)
            keep, max_phys = 0, -1
            for pos in range(0, len(data), CQ_STORE_UNIT_SIZE):
                offset, size, _ = CQ_ENTRY.unpack_from(data, pos)
                if is_blank_entry(offset, size):
                    keep = pos + CQ_STORE_UNIT_SIZE
                    continue
                if offset < 0 or size <= 0 or offset + size > phy_offset:
                    break
                keep = pos + CQ_STORE_UNIT_SIZE
                max_phys = offset + size
            if keep == 0 and len(self.mfq.files) > 1:
                self.mfq.delete_last()
                continue
            self.mfq.truncate_dirty(mf.file_from_offset + keep)
            self.max_physic_offset = max_phys
            return
        self.max_physic_offset = -1

    def correct_min_offset(self, phy_min: int) -> None:
        """Min logical offset = first entry whose physical offset >= commit-log min."""
        for mf in self.mfq.files:
            data = mf.read(0, mf.wrote_position)
            for pos in range(0, len(data), CQ_STORE_UNIT_SIZE):
                offset, size, _ = CQ_ENTRY.unpack_from(data, pos)
                if offset >= phy_min and not is_blank_entry(offset, size):
                    self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + pos)
                    return
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.max_offset())

    def last_entry_phys(self, mf: MappedFile) -> int:
        """Physical offset of the last entry of segment `mf` (-1 if empty)."""
        if mf.wrote_position < CQ_STORE_UNIT_SIZE:
            return -1
        offset, _size, _ = CQ_ENTRY.unpack(
            mf.read(mf.wrote_position - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
        )
        return int(offset)

    def flush(self, least_pages: int = 0) -> bool:
        return self.mfq.flush(least_pages)

    def first_unflushed_phys(self) -> int:
        """Commit-log offset of the first record whose entry is not yet on disk (blank
        entries name no record), or 2**62 if there is none."""
        where = self.mfq.flushed_where
        while (mf := self.mfq.find(where)) is not None:
            rel = where - mf.file_from_offset
            data = mf.read(rel, mf.wrote_position - rel)
            for pos in range(0, len(data) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                offset, size, _ = CQ_ENTRY.unpack_from(data, pos)
                if not is_blank_entry(offset, size):
                    return max(0, int(offset))
            if mf.wrote_position < mf.file_size:
                break
            where = mf.file_end_offset
        return 1 << 62

    def destroy(self) -> None:
        self.mfq.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.mfq.store_path))
