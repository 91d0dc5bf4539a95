"""One fixed-size, memory-mapped segment file named by its 20-digit start offset.

How this works: the file is sized to its full length when created (sparse), mapped once,
written through the mmap by the owner thread (the event loop; large records with `pwritev`
on `fd`, the same page cache), optionally warmed just ahead of the writer by a worker
thread (`warm()`), and made durable with `os.fdatasync` on its descriptor, usually from a
worker thread; Linux writes back the mmap-dirtied pages of the inode.  `wrote_position`
is the end of the data written, `flushed_position` the end known to be on disk.  Reads
copy into `bytes`, so no buffer export outlives a method and the map can be closed at any
time; `hold()`/`release()` let a caller that needs a file to stay open (an HA sender, an
inspector) delay its destruction, which `destroy()` forces after
`destroyMapedFileIntervalForcibly`.
"""

from __future__ import annotations

import contextlib
import mmap
import os

from engine.store.errors import MappedFileError

OS_PAGE_SIZE = 4096
_ZERO_CHUNK = bytes(1 << 20)
WARM_CHUNK = 1 << 20  # warm() reads this much per call (GIL released)


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName: 20 decimal digits, zero-padded."""
    return f"{offset:020d}"


class MappedFile:
    """A segment: `file_from_offset` is the global offset of its first byte."""

    __slots__ = (
        "_first_shutdown_ms",
        "_refs",
        "direct_bytes",
        "fd",
        "file_from_offset",
        "file_name",
        "file_size",
        "flushed_position",
        "last_flushed_timestamp",
        "mm",
        "store_timestamp",
        "warmed",
        "wrote_position",
    )

    def __init__(self, path: str, file_size: int) -> None:
        self.file_name = path
        self.file_size = file_size
        try:
            self.file_from_offset = int(os.path.basename(path))
        except ValueError:
            raise MappedFileError(f"{path}: segment name is not an offset") from None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise MappedFileError(f"cannot open {path}: {e}") from e
        try:
            if os.fstat(fd).st_size < file_size:
                os.ftruncate(fd, file_size)
            self.mm = mmap.mmap(fd, file_size)
        except (OSError, ValueError) as e:
            os.close(fd)
            raise MappedFileError(f"cannot size or map {path} to {file_size} bytes: {e}") from e
        self.fd = fd  # for pwritev of large records; -1 once closed
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store time of the last record written
        self.last_flushed_timestamp = 0  # store time of the last record flushed
        self._refs = 0
        self._first_shutdown_ms = 0
        self.warmed = (0, 0)  # [start, end) read into the page cache by warm()
        self.direct_bytes = 0  # of wrote_position, the bytes written with pwritev

    def __repr__(self) -> str:
        return f"MappedFile({self.file_name!r}, wrote={self.wrote_position})"

    # ---- state
    @property
    def closed(self) -> bool:
        return self.fd < 0

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.file_name).st_mtime * 1000)
        except OSError:
            return 0

    # ---- bytes
    def read(self, pos: int, size: int) -> bytes:
        """Copy `size` bytes at `pos` (within written data only) or b"" if out of range."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return b""
        return self.mm[pos : pos + size]

    def read_raw(self, pos: int, size: int) -> bytes:
        """Copy bytes at `pos` regardless of the write position (recovery, inspection)."""
        end = min(pos + size, self.file_size)
        return self.mm[pos:end] if pos < end else b""

    def append(self, data: bytes) -> bool:
        """Append raw bytes (HA replication, tests); False if they do not fit."""
        pos = self.wrote_position
        if pos + len(data) > self.file_size:
            return False
        self.mm[pos : pos + len(data)] = data
        self.wrote_position = pos + len(data)
        return True

    def zero_tail(self, pos: int) -> None:
        """Zero stale bytes from `pos` until the first 1 MiB chunk that is already zero.

        Stops a torn or truncated tail from being mistaken for records after new writes
        overwrite part of it.
        """
        n = len(_ZERO_CHUNK)
        while pos < self.file_size:
            end = min(pos + n, self.file_size)
            if self.mm[pos:end] == _ZERO_CHUNK[: end - pos]:
                return
            self.mm[pos:end] = _ZERO_CHUNK[: end - pos]
            pos = end

    def allocate(self) -> None:
        """posix_fallocate the whole file (a worker thread): writes need no block allocation.

        Closed meanwhile, or unsupported: blocks are allocated on writeback instead.
        """
        with contextlib.suppress(OSError):
            os.posix_fallocate(self.fd, 0, self.file_size)

    def warm(self, ahead: int) -> bool:
        """Read pages into the page cache up to `ahead` bytes past the write position.

        Runs in a worker thread, repeatedly, as the writer advances: mmap appends then map
        cached pages instead of allocating one per 4 KiB fault (about twice as fast), while
        only pages about to be written are read.  preadv releases the GIL and changes no
        content, so this is safe on a segment being written, and, unlike writing zeros, it
        leaves no dirty pages to write back.  It starts a chunk past the writer (reading the
        pages being written would only contend with it) and gives up once the writer has
        overtaken it, or once most bytes were written with pwritev (`direct_bytes`): such
        records bring their own pages, and reading ahead of them only competes with them.

        Returns:
            False when there is nothing more to warm in this file.
        """
        start, end = self.warmed
        size = self.file_size
        wrote = self.wrote_position
        if self.fd < 0 or wrote >= size or self.direct_bytes * 2 > wrote:
            return False
        if end <= wrote:  # nothing warm ahead of the writer
            if end > start:
                return False  # overtaken: this writer is faster than warming
            start = end = (wrote // WARM_CHUNK + 2) * WARM_CHUNK if wrote else 0
        target = min(size, wrote + ahead)
        buf = bytearray(WARM_CHUNK)
        try:
            while end < target:
                if self.fd < 0:
                    return False
                os.preadv(self.fd, [buf], end)
                end = min(size, end + WARM_CHUNK)
                self.warmed = (start, end)
        except OSError:
            return False  # closed meanwhile: pages fault in on first write
        return end < size

    # ---- durability
    def flush(self) -> int:
        """fdatasync up to the current write position; returns the flushed position."""
        pos = self.wrote_position
        ts = self.store_timestamp
        if pos > self.flushed_position and self.fd >= 0:
            os.fdatasync(self.fd)
            self.flushed_position = pos
            self.last_flushed_timestamp = ts
        return self.flushed_position

    # ---- lifetime
    def hold(self) -> bool:
        if self.fd < 0 or self._first_shutdown_ms:
            return False
        self._refs += 1
        return True

    def release(self) -> None:
        self._refs = max(0, self._refs - 1)

    def close(self) -> None:
        if self.fd >= 0:
            self.mm.close()
            os.close(self.fd)
            self.fd = -1

    def destroy(self, interval_forcibly_ms: int, now_ms: int) -> bool:
        """Close and delete the file unless held; a held file goes after the interval.

        Returns:
            True if the file is gone.
        """
        if self._refs > 0:
            if not self._first_shutdown_ms:
                self._first_shutdown_ms = now_ms
                return False
            if now_ms - self._first_shutdown_ms < interval_forcibly_ms:
                return False
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.file_name)
        return True
