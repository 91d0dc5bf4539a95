"""The timer wheel: one 32-byte slot per precision step, over twice the wheel's span.

Layout (Apache 5.3 `TimerWheel` / `Slot`, big-endian, one file `<storePathRootDir>/timerwheel`
of `slots_total * 2 * 32` bytes, mapped; slot index = time / precision % (slots_total * 2)):

    offset size field
         0    8 time          the slot's time / precision (a stale slot holds an older time)
         8    8 first pos     timer-log position of the slot's first unit
        16    8 last pos      ... of its last unit (units chain backwards by their prev pos)
        24    4 num           units in the slot
        28    4 magic         0

`slots_total` is 7 days of slots (Apache's TIMER_WHEEL_TTL_DAY): 604,800 at 1 s precision, the
file Apache writes.  At a finer precision the wheel keeps 7 days (Apache keeps the slot count
and rolls long timers instead; docs/timers.md), so the file is larger but sparse.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import NamedTuple

from engine.store.errors import StoreLoadError

SLOT = struct.Struct(
    ">"
    "q"  # time / precision
    "q"  # first pos
    "q"  # last pos
    "i"  # num
    "i"  # magic
)
SLOT_SIZE = 32
assert SLOT.size == SLOT_SIZE
WHEEL_TTL_DAYS = 7
DAY_MS = 86_400_000


class Slot(NamedTuple):
    first: int
    last: int
    num: int


EMPTY = Slot(-1, -1, 0)


class TimerWheel:
    """The mapped slot file; `precision_ms` fixes its size."""

    def __init__(self, path: str, precision_ms: int) -> None:
        self.path = path
        self.precision = precision_ms
        self.slots_total = WHEEL_TTL_DAYS * DAY_MS // precision_ms
        self.span_ms = self.slots_total * precision_ms
        self._ring = self.slots_total * 2
        length = self._ring * SLOT_SIZE
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, length):
                raise StoreLoadError(
                    f"{path}: timer wheel length {size} != {length} expected for "
                    f"timerPrecisionMs={precision_ms}; restore the setting it was written with")
            if size == 0:
                os.ftruncate(fd, length)
            self.mm = mmap.mmap(fd, length)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def _at(self, time_ms: int) -> int:
        return time_ms // self.precision % self._ring * SLOT_SIZE

    def get(self, time_ms: int) -> Slot:
        """The slot of `time_ms`, EMPTY when the wheel holds nothing for that time."""
        t, first, last, num, _ = SLOT.unpack_from(self.mm, self._at(time_ms))
        if t != time_ms // self.precision:
            return EMPTY
        return Slot(first, last, num)

    def put(self, time_ms: int, slot: Slot) -> None:
        SLOT.pack_into(self.mm, self._at(time_ms), time_ms // self.precision, slot.first,
                       slot.last, slot.num, 0)

    def clear(self, time_ms: int) -> None:
        """Forget the slot (its time no longer matches anything)."""
        SLOT.pack_into(self.mm, self._at(time_ms), -1, -1, -1, 0, 0)

    def flush(self) -> None:
        """msync the map (blocking: call from a worker thread)."""
        if self.fd >= 0:
            self.mm.flush()

    def close(self) -> None:
        if self.fd >= 0:
            self.mm.flush()
            self.mm.close()
            os.close(self.fd)
            self.fd = -1
