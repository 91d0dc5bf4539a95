"""Timer recovery helpers: undo the wheel past the checkpoint, find deliveries already made.

How this works (docs/timers.md, "Recovery" and "Exactly once"): the checkpoint names a
flushed timer-log end W matching a timer-queue offset Q.  Units past W are dropped (their
queue entries are enqueued again); before that, each slot whose chain reaches past W is cut
back along the prev pointers (`cut_wheel`).  Deliveries are never undone: the commit log is
scanned from the checkpoint's deliveredFromPhy, and every record there that is a timer
delivery is counted by its identity (`delivered_since`); the timer service then skips one
redelivery per counted identity.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from engine.protocol.errors import ProtocolError
from engine.protocol.message import BLANK_MAGIC, SIZE_MAGIC, decode_record
from engine.store.timer.timer_log import TimerLog
from engine.store.timer.transform import Identity, delivered_identity
from engine.store.timer.wheel import Slot, TimerWheel

log = logging.getLogger(__name__)

_MARK = b"TIMER_DEQUEUE_MS\x01"
_CHUNK = 16 * 1024 * 1024  # above the largest record (maxMessageSize 4 MiB + head)
ReadCommitLog = Callable[[int, int], bytes | None]


def cut_wheel(wheel: TimerWheel, timer_log: TimerLog, end: int) -> int:
    """Cut every slot back to the units before timer-log position `end`; returns how many
    units were cut (call before the log itself is truncated)."""
    cut = 0
    times = {u.deliver_ms // wheel.precision * wheel.precision
             for u in timer_log.units_from(end)}
    for t in sorted(times):
        slot = wheel.get(t)
        if slot.num == 0 or slot.last < end:
            continue
        pos, num = slot.last, slot.num
        while pos >= end:
            unit = timer_log.read(pos)
            if unit is None:
                pos = -1
                break
            pos, num = unit.prev, num - 1
            cut += 1
        if pos < 0 or num <= 0:
            wheel.clear(t)
        else:
            wheel.put(t, Slot(slot.first, pos, num))
    return cut


def delivered_since(read: ReadCommitLog, start: int, end: int) -> Counter[Identity]:
    """Identities of the timer deliveries stored in commit-log [start, end)."""
    found: Counter[Identity] = Counter()
    pos = start
    while pos < end:
        chunk = read(pos, min(_CHUNK, end - pos))
        if not chunk:
            break
        i, skip = 0, 0
        while i + 8 <= len(chunk):
            total, magic = SIZE_MAGIC.unpack_from(chunk, i)
            if magic == BLANK_MAGIC:
                skip = total  # the rest of the segment
                break
            if total <= 0 or i + total > len(chunk):
                break
            record = chunk[i:i + total]
            if _MARK in record:
                try:
                    ident = delivered_identity(decode_record(record))
                except ProtocolError as exc:
                    log.warning("timer recovery: unreadable record at %d (%s)", pos + i, exc)
                    ident = None
                if ident is not None:
                    found[ident] += 1
            i += total
        if i == 0 and skip == 0:
            break  # torn or foreign bytes: nothing after them was written by a put
        pos += i + skip
    return found
