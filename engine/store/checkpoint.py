"""The checkpoint file (flush times of commit log, consume queues, index) and the abort marker.

    offset  size  field
    ------  ----  ---------------------------------------------------------------
         0     8  physicMsgTimestamp  store time of the last flushed commit-log record
         8     8  logicsMsgTimestamp  store time of the last record dispatched (on CQ flush)
        16     8  indexMsgTimestamp   end time of the last flushed index file
    (4096 bytes in all; the rest is zero, 5.x uses 24..39)
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct

from engine.store.errors import StoreLoadError

CHECKPOINT = struct.Struct(
    ">"
    "q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
)
assert CHECKPOINT.size == 24
CHECKPOINT_FILE_SIZE = 4096


class StoreCheckpoint:
    """Memory-mapped checkpoint; values are set in memory and written by `flush()`."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
            os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
        self._fd = fd
        self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            CHECKPOINT.unpack_from(self._mm, 0)
        )

    def flush(self) -> None:
        if self._fd < 0:
            return
        CHECKPOINT.pack_into(
            self._mm, 0,
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
        )  # fmt: skip
        os.fdatasync(self._fd)

    def min_timestamp(self) -> int:
        """min(physic, logics) - 3 s, not below 0."""
        return max(0, min(int(self.physic_msg_timestamp), int(self.logics_msg_timestamp)) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), int(self.index_msg_timestamp))

    def close(self) -> None:
        if self._fd >= 0:
            self._mm.close()
            os.close(self._fd)
            self._fd = -1


def lock_store_dir(path: str) -> int:
    """Lock `<root>/lock` (content `lock`, as RocketMQ); returns the descriptor to keep open.

    Raises:
        StoreLoadError: another process holds the lock.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError:
        os.close(fd)
        raise StoreLoadError(
            f"{path} is locked by another process: is a broker already running on this store?"
        ) from None
    if os.fstat(fd).st_size == 0:
        os.write(fd, b"lock")
    return fd


def create_abort_file(path: str) -> None:
    """Mark the store as running; a crash leaves the file behind."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd)
    os.close(fd)


def delete_abort_file(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
