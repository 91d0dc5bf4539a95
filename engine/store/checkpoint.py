"""The checkpoint file (flush times and the recovery point) and the abort marker.

    offset  size  field
    ------  ----  ---------------------------------------------------------------
         0     8  physicMsgTimestamp  store time of the last flushed commit-log record
         8     8  logicsMsgTimestamp  store time of the last record dispatched (on CQ flush)
        16     8  indexMsgTimestamp   end time of the last flushed index file
      2048    24  recovery slot A     (this engine; RocketMQ reads only 0..23, 5.x 0..39)
      3072    24  recovery slot B
    (4096 bytes in all; the rest is zero)

    recovery slot
    offset  size  field
         0     4  magic 0x52435031 ("RCP1")
         4     4  CRC32 of bytes 8..23
         8     8  sequence number (the slot with the higher valid one wins)
        16     8  recovery offset: every commit-log record before it is on disk, and so
                  are its consume-queue and index entries

How this works: the recovery offset lets a crashed store verify only what was written
after it (recovery.py).  Writes alternate between the two slots, each behind a CRC, so a
write torn by a crash leaves the other slot, an older but still true recovery offset.
Lowering the offset (before a commit-log truncation) writes both slots, and every
offset computed from a state older than that lowering is discarded (`epoch`).  Without
a valid slot (a store written by RocketMQ) recovery falls back to the timestamps.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading
import zlib

from engine.store.errors import StoreLoadError

CHECKPOINT = struct.Struct(
    ">"
    "q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
)
assert CHECKPOINT.size == 24
CHECKPOINT_FILE_SIZE = 4096
RECOVERY_SLOT = struct.Struct(
    ">"
    "I"  # magic RECOVERY_MAGIC
    "I"  # CRC32 of the 16 bytes that follow
    "q"  # sequence number
    "q"  # recovery offset
)
assert RECOVERY_SLOT.size == 24
RECOVERY_MAGIC = 0x52435031
RECOVERY_SLOTS = (2048, 3072)
_SEQ_OFFSET = struct.Struct(">qq")


def read_recovery_offset(buf: bytes | mmap.mmap) -> tuple[int, int] | None:
    """(sequence, recovery offset) of the newest valid slot, or None."""
    best: tuple[int, int] | None = None
    for at in RECOVERY_SLOTS:
        magic, crc, seq, offset = RECOVERY_SLOT.unpack_from(buf, at)
        if magic != RECOVERY_MAGIC or zlib.crc32(buf[at + 8 : at + 24]) != crc or offset < 0:
            continue
        if best is None or seq > best[0]:
            best = (seq, offset)
    return best


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
        slot = read_recovery_offset(self._mm)
        self._seq = slot[0] if slot else 0
        #: Commit-log offset recovery may start verifying at; None: no valid slot.
        self.recovery_offset: int | None = slot[1] if slot else None
        #: Bumped by every lowering; an offset computed under an older epoch is stale.
        self.epoch = 0
        self._lock = threading.Lock()

    def advance(self, offset: int, epoch: int) -> None:
        """Raise the recovery offset for the next `flush()` unless `epoch` is stale (it
        only goes down through `lower`)."""
        with self._lock:
            if epoch == self.epoch and (
                self.recovery_offset is None or offset > self.recovery_offset
            ):
                self.recovery_offset = offset

    def lower(self, offset: int) -> None:
        """Make the recovery offset at most `offset` on disk now (both slots), before the
        commit log is cut there."""
        with self._lock:
            self.epoch += 1
            if self.recovery_offset is None or self.recovery_offset <= offset or self._fd < 0:
                return
            self.recovery_offset = offset
            for _ in RECOVERY_SLOTS:
                self._write_slot(offset)
                os.fdatasync(self._fd)

    def flush(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            CHECKPOINT.pack_into(
                self._mm, 0,
                self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
            )  # fmt: skip
            if self.recovery_offset is not None:
                self._write_slot(self.recovery_offset)
            os.fdatasync(self._fd)

    def _write_slot(self, offset: int) -> None:
        """Write the slot not holding the newest value (the caller holds the lock)."""
        self._seq += 1
        body = _SEQ_OFFSET.pack(self._seq, offset)
        at = RECOVERY_SLOTS[self._seq % 2]
        self._mm[at : at + RECOVERY_SLOT.size] = (
            RECOVERY_MAGIC.to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body
        )

    def min_timestamp(self) -> int:
        """min(physic, logics) - 3 s, not below 0."""
        return max(0, min(int(self.physic_msg_timestamp), int(self.logics_msg_timestamp)) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), int(self.index_msg_timestamp))

    def close(self) -> None:
        with self._lock:
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
