"""The timer log: append-only 52-byte units, one per enqueued timer, chained per slot.

Layout (Apache 5.3 `TimerLog`, big-endian, segments named by their start offset like the
commit log's, under `<storePathRootDir>/timerlog`):

    offset size field
         0    4 size          UNIT_SIZE (52); a blank's size is the rest of the segment
         4    8 prev pos      the previous unit of the same slot, -1 for the first
        12    4 magic         1 (MAGIC_DEFAULT); BLANK_MAGIC ends a segment
        16    8 write time    the wheel's write time when enqueued (ms, precision-rounded)
        24    4 delay delta   delivery time - write time (ms)
        28    8 offsetPy      commit-log offset of the parked message
        36    4 sizePy        its size
        40    4 topic hash    0 here (Apache: the real topic's hash, for its metrics)
        44    8 reserved      0

A unit never straddles two segments: when fewer than UNIT_SIZE + MIN_BLANK_LEN bytes are
left, a blank (size, 0, BLANK_MAGIC) fills the rest and the next segment starts.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from engine.store.mapped_file import MappedFile
from engine.store.mapped_file_queue import MappedFileQueue

UNIT = struct.Struct(
    ">"
    "i"  # size
    "q"  # prev pos
    "i"  # magic
    "q"  # write time ms
    "i"  # delivery time - write time
    "q"  # offsetPy
    "i"  # sizePy
    "i"  # real topic hash (0)
    "q"  # reserved
)
UNIT_SIZE = 52
assert UNIT.size == UNIT_SIZE
BLANK = struct.Struct(">iqi")  # size, 0, BLANK_MAGIC
MIN_BLANK_LEN = 4 + 8 + 4
assert BLANK.size == MIN_BLANK_LEN
BLANK_MAGIC = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)  # Java int, as TimerLog's
MAGIC_DEFAULT = 1


class Unit(NamedTuple):
    """One timer-log unit, decoded."""

    pos: int
    prev: int
    magic: int
    write_ms: int
    deliver_ms: int
    offset_py: int
    size_py: int


class TimerLog:
    """The unit segments; positions are global offsets like the commit log's."""

    def __init__(self, path: str, file_size: int) -> None:
        self.mfq = MappedFileQueue(path, file_size)
        self._latest: dict[int, int] = {}  # full segment -> latest delivery time in it

    def load(self) -> None:
        self.mfq.load()

    def end(self) -> int:
        return self.mfq.max_offset()

    def append(self, prev: int, write_ms: int, deliver_ms: int, offset_py: int,
               size_py: int) -> int:
        """Append one unit; returns its position.

        Raises:
            MappedFileError: a segment could not be created.
        """
        mf = self.mfq.get_last()
        assert mf is not None
        if mf.remaining() < UNIT_SIZE + MIN_BLANK_LEN:
            mf.append(BLANK.pack(mf.remaining(), 0, BLANK_MAGIC))
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last()
            assert mf is not None
        pos = mf.file_from_offset + mf.wrote_position
        mf.append(UNIT.pack(UNIT_SIZE, prev, MAGIC_DEFAULT, write_ms, deliver_ms - write_ms,
                            offset_py, size_py, 0, 0))
        return pos

    def read(self, pos: int) -> Unit | None:
        """The unit at `pos`; None when it is not there (cleaned up or never written)."""
        mf = self.mfq.find(pos)
        if mf is None:
            return None
        raw = mf.read(pos - mf.file_from_offset, UNIT_SIZE)
        if len(raw) != UNIT_SIZE:
            return None
        size, prev, magic, write_ms, delta, off, sz, _, _ = UNIT.unpack(raw)
        if size != UNIT_SIZE or magic != MAGIC_DEFAULT:
            return None
        return Unit(pos, prev, magic, write_ms, write_ms + delta, off, sz)

    def recover(self, end: int) -> None:
        """Make `end` (a checkpointed, flushed position) the log's end; later units go (their
        timers are enqueued again from the commit log)."""
        mfq = self.mfq
        for mf in mfq.files:  # load() marks every segment full; the checkpoint knows better
            if mf.file_end_offset <= end:
                continue
            if mf.file_from_offset <= end:
                mf.wrote_position = mf.flushed_position = end - mf.file_from_offset
        mfq.truncate_dirty(end)

    def units_from(self, start: int) -> list[Unit]:
        """Every unit from `start` to the current end (recovery walks what it drops)."""
        out: list[Unit] = []
        pos = start
        end = self.end()
        while pos < end:
            mf = self.mfq.find(pos)
            if mf is None:
                break
            raw = mf.read_raw(pos - mf.file_from_offset, UNIT_SIZE)
            if len(raw) < MIN_BLANK_LEN:
                pos = mf.file_end_offset
                continue
            size, prev, magic = BLANK.unpack_from(raw)
            if magic == BLANK_MAGIC:
                pos = mf.file_end_offset
                continue
            if size != UNIT_SIZE or magic != MAGIC_DEFAULT or len(raw) != UNIT_SIZE:
                break
            _, prev, magic, write_ms, delta, off, sz, _, _ = UNIT.unpack(raw)
            out.append(Unit(pos, prev, magic, write_ms, write_ms + delta, off, sz))
            pos += UNIT_SIZE
        return out

    def count_from(self, slot_ms: int, precision_ms: int) -> int:
        """Units whose slot is `slot_ms` or later (how many timers wait, after recovery)."""
        total = 0
        for mf in self.mfq.files:
            data = mf.read_raw(0, mf.wrote_position - mf.wrote_position % UNIT_SIZE)
            for size, _, magic, write_ms, delta, _, _, _, _ in UNIT.iter_unpack(data):
                if size != UNIT_SIZE or magic != MAGIC_DEFAULT:
                    break
                if (write_ms + delta) // precision_ms * precision_ms >= slot_ms:
                    total += 1
        return total

    def delete_delivered(self, slot_ms: int, precision_ms: int) -> int:
        """Delete leading full segments whose every unit's slot is before `slot_ms` (all
        delivered); returns how many went.  Never the last segment."""
        def still_needed(mf: MappedFile) -> bool:
            latest = self._latest.get(mf.file_from_offset)
            if latest is None:
                data = mf.read_raw(0, mf.wrote_position - mf.wrote_position % UNIT_SIZE)
                latest = max((w + d for size, _, magic, w, d, _, _, _, _ in UNIT.iter_unpack(data)
                              if size == UNIT_SIZE and magic == MAGIC_DEFAULT), default=0)
                self._latest[mf.file_from_offset] = latest
            return latest // precision_ms * precision_ms >= slot_ms

        gone = self.mfq.delete_below(still_needed, 0, 0)
        for mf in gone:
            self._latest.pop(mf.file_from_offset, None)
        return len(gone)

    def flush(self) -> None:
        self.mfq.flush(0)

    def close(self) -> None:
        self.mfq.flush(0)
        self.mfq.close()
