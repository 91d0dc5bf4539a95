"""The timer checkpoint file `<storePathRootDir>/config/timercheck`.

Layout (Apache 5.3 `TimerCheckpoint`, big-endian longs, in a 4 KiB file):

    offset field
         0 lastReadTimeMs          slots before it are delivered
         8 lastTimerLogFlushPos    the timer log is complete and flushed up to here
        16 lastTimerQueueOffset    timer-topic queue entries before it are in the log
        24 masterTimerQueueOffset  the master's, as a slave last synced it
        32 dataVersion            stateVersion, timestamp, counter
        56 deliveredFromPhy        (ours) every delivery not covered by the fields above
                                   is at or after this commit-log offset (docs/timers.md)
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

CHECKPOINT = struct.Struct(
    ">"
    "q"  # lastReadTimeMs
    "q"  # lastTimerLogFlushPos
    "q"  # lastTimerQueueOffset
    "q"  # masterTimerQueueOffset
    "q"  # dataVersion.stateVersion
    "q"  # dataVersion.timestamp
    "q"  # dataVersion.counter
    "q"  # deliveredFromPhy (ours)
)
assert CHECKPOINT.size == 64
FILE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    read_ms: int = 0
    log_flush_pos: int = 0
    queue_offset: int = 0
    master_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0
    delivered_from_phy: int = 0

    def encode(self) -> bytes:
        return CHECKPOINT.pack(
            self.read_ms, self.log_flush_pos, self.queue_offset, self.master_queue_offset,
            self.state_version, self.timestamp, self.counter, self.delivered_from_phy)

    @classmethod
    def decode(cls, data: bytes) -> TimerCheckpoint:
        return cls(*CHECKPOINT.unpack_from(data.ljust(CHECKPOINT.size, b"\0")))


def read_checkpoint(path: str) -> TimerCheckpoint | None:
    """The checkpoint on disk, or None when there is none."""
    try:
        with open(path, "rb") as f:
            data = f.read(CHECKPOINT.size)
    except FileNotFoundError:
        return None
    return TimerCheckpoint.decode(data)


def write_checkpoint(path: str, cp: TimerCheckpoint) -> None:
    """Write and fdatasync (blocking: from a worker thread, or at load and close)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < FILE_SIZE:
            os.ftruncate(fd, FILE_SIZE)
        os.pwrite(fd, cp.encode(), 0)
        os.fdatasync(fd)
    finally:
        os.close(fd)
