"""An ordered directory of equal-size segments: lookup by offset, rolling, flush, truncation.

How this works: segments are named by their start offset and contiguous.  The owner thread
(the event loop) appends to the last one; `flush()` may run in a worker thread, so every
change of the segment list happens under `_lock`.  When a segment is created, the next one
is requested from the `Preallocator` (a one-thread executor) that creates and sizes it off
the hot path and, with warming, reads pages into the page cache just ahead of the writer.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from engine.store.errors import MappedFileError, StoreLoadError
from engine.store.mapped_file import OS_PAGE_SIZE, MappedFile, offset_to_file_name

WARM_AHEAD = 32 << 20  # bytes of page cache kept warm ahead of the writer
WARM_PERIOD = 0.02  # seconds between two warming passes over the segment being written


class Preallocator:
    """Creates the next segment in a background thread and keeps pages ahead of the writer warm.

    One worker thread runs, in order, segment creation (`request`: create, size and, with
    warming, fallocate) and warming passes (`MappedFile.warm`): a prepared segment gets its
    first `WARM_AHEAD` bytes, and the segment being written (`warm_later`) a pass every
    `WARM_PERIOD` that reads up to `WARM_AHEAD` past its writer.  Warming thus costs about
    what is written, never competes with the writer for the pages it writes, and `take()`
    never waits for it.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-prealloc")
        self._pending: dict[str, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def _make(path: str, size: int, warm: bool) -> MappedFile:
        mf = MappedFile(path, size)
        if warm:
            mf.allocate()
        return mf

    def request(self, path: str, size: int, warm: bool) -> None:
        with self._lock:
            if self._closed or path in self._pending:
                return
            fut = self._pending[path] = self._pool.submit(self._make, path, size, warm)
            if warm:
                self._pool.submit(self._warm_first, fut)

    @staticmethod
    def _warm_first(fut: Future[MappedFile]) -> None:
        try:
            mf = fut.result()
        except MappedFileError:
            return
        mf.warm(WARM_AHEAD)

    def warm_later(self, mf: MappedFile, allocate: bool = False) -> None:
        """Keep the pages ahead of the writer of `mf`, the segment now written, warm."""
        if allocate:
            self._submit(MappedFile.allocate, mf)
        self._submit(self._warm_pass, mf)

    def _warm_pass(self, mf: MappedFile) -> None:
        if mf.warm(WARM_AHEAD):
            time.sleep(WARM_PERIOD)
            self._submit(self._warm_pass, mf)

    def _submit(self, fn: Callable[[MappedFile], None], mf: MappedFile) -> None:
        with self._lock:
            if not self._closed:
                self._pool.submit(fn, mf)

    def take(self, path: str) -> MappedFile | None:
        with self._lock:
            fut = self._pending.pop(path, None)
        if fut is None:
            return None
        try:
            return fut.result()
        except MappedFileError:
            return None

    def shutdown(self) -> None:
        """Stop the thread and delete segments that were prepared but never used."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            try:
                mf = fut.result()
            except Exception:
                continue
            mf.destroy(0, 0)


class MappedFileQueue:
    """Segments of `file_size` bytes in `store_path`."""

    def __init__(
        self,
        store_path: str,
        file_size: int,
        *,
        preallocator: Preallocator | None = None,
        warm: bool = False,
    ) -> None:
        self.store_path = store_path
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.store_timestamp = 0  # store time of the last flushed record
        self.short_last_file = False  # load() found the last segment cut short
        self._prealloc = preallocator
        self._warm = warm
        self._lock = threading.Lock()

    # ---- loading
    def load(self) -> None:
        """Open every segment, all marked fully written (recovery sets the real tail).

        Raises:
            StoreLoadError: a segment whose name is not an offset or whose size differs
                (a shorter *last* segment is extended: a torn file end).
        """
        if not os.path.isdir(self.store_path):
            return
        names = sorted(n for n in os.listdir(self.store_path) if not n.startswith("."))
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            if not name.isdigit():
                raise StoreLoadError(f"{path}: not a segment (name must be an offset)")
            if int(name) % self.file_size:
                raise StoreLoadError(
                    f"{path}: start offset is not a multiple of the configured segment size "
                    f"{self.file_size}; fix the mapped file size setting"
                )
            size = os.path.getsize(path)
            if size != self.file_size and not (i == len(names) - 1 and size < self.file_size):
                raise StoreLoadError(
                    f"{path}: length {size} differs from the configured segment size "
                    f"{self.file_size}; fix the mapped file size setting"
                )
            self.short_last_file = size < self.file_size
            mf = MappedFile(path, self.file_size)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    # ---- lookup
    @property
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def min_offset(self) -> int:
        f = self.first
        return f.file_from_offset if f else 0

    def max_offset(self) -> int:
        f = self.last
        return f.file_from_offset + f.wrote_position if f else 0

    def find(self, offset: int, return_first_on_miss: bool = False) -> MappedFile | None:
        """The segment holding global `offset`."""
        with self._lock:
            files = self.files
            if not files:
                return None
            first = files[0]
            idx = (offset - first.file_from_offset) // self.file_size
            if 0 <= idx < len(files):
                mf = files[idx]
                if mf.file_from_offset <= offset < mf.file_end_offset:
                    return mf
            return first if return_first_on_miss else None

    def get_last(self, start_offset: int = 0, create: bool = True) -> MappedFile | None:
        """The segment to append to, creating the next one if the last is full.

        Raises:
            MappedFileError: the segment could not be created.
        """
        last = self.last
        if last is not None and not last.is_full():
            return last
        if not create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_end_offset
        path = os.path.join(self.store_path, offset_to_file_name(create_offset))
        os.makedirs(self.store_path, exist_ok=True)
        mf = self._prealloc.take(path) if self._prealloc else None
        created = mf is None
        if mf is None:
            mf = MappedFile(path, self.file_size)
        if self._prealloc is not None and self._warm:
            self._prealloc.warm_later(mf, allocate=created)
        if self._prealloc is not None:
            nxt = os.path.join(self.store_path, offset_to_file_name(create_offset + self.file_size))
            self._prealloc.request(nxt, self.file_size, self._warm)
        with self._lock:
            if not self.files:
                self.flushed_where = create_offset
            self.files.append(mf)
        return mf

    # ---- flush (may run in a worker thread)
    def flush(self, least_pages: int = 0) -> bool:
        """Flush from `flushed_where` on; returns True if everything written is on disk."""
        while True:
            where = self.flushed_where
            mf = self.find(where, return_first_on_miss=where == 0)
            if mf is None:
                first = self.first
                if first is not None and where < first.file_from_offset:
                    self.flushed_where = first.file_from_offset  # cleanup removed it
                    continue
                return True
            unflushed = mf.wrote_position - mf.flushed_position
            if unflushed <= 0:
                if mf.is_full() and mf is not self.last:
                    self.flushed_where = mf.file_end_offset
                    continue
                return True
            if least_pages > 0 and unflushed < least_pages * OS_PAGE_SIZE and not mf.is_full():
                return False
            mf.flush()
            self.flushed_where = mf.file_from_offset + mf.flushed_position
            self.store_timestamp = mf.last_flushed_timestamp or self.store_timestamp
            if not mf.is_full():
                return True

    # ---- truncation and deletion
    def truncate_dirty(self, offset: int) -> None:
        """Make `offset` the end of data: reset the tail segment, delete later ones."""
        doomed: list[MappedFile] = []
        for mf in list(self.files):
            if mf.file_end_offset > offset:
                if offset >= mf.file_from_offset:
                    pos = offset - mf.file_from_offset
                    mf.wrote_position = mf.flushed_position = pos
                    mf.zero_tail(pos)
                else:
                    doomed.append(mf)
        self._remove(doomed)
        for mf in doomed:
            mf.destroy(0, 0)
        self.flushed_where = min(self.flushed_where, offset) if self.files else offset

    def delete_last(self) -> None:
        """Delete the last segment (a consume queue cut before its first entry)."""
        last = self.last
        if last is not None:
            self._remove([last])
            last.destroy(0, 0)
            self.flushed_where = min(self.flushed_where, self.max_offset())

    def _remove(self, doomed: list[MappedFile]) -> None:
        if doomed:
            ids = {id(m) for m in doomed}
            with self._lock:
                self.files = [m for m in self.files if id(m) not in ids]

    def delete_expired_by_time(
        self,
        expired_ms: int,
        delete_interval_ms: int,
        destroy_forcibly_ms: int,
        clean_immediately: bool,
        now_ms: int,
        max_files: int,
        sleep: Callable[[float], None] | None = None,
        dry_run: bool = False,
    ) -> list[MappedFile]:
        """Delete (or, dry, list) segments older than `expired_ms`, never the last one."""
        deleted: list[MappedFile] = []
        for mf in self.files[:-1]:
            if len(deleted) >= max_files:
                break
            if not (now_ms >= mf.last_modified_ms() + expired_ms or clean_immediately):
                break
            if dry_run:
                deleted.append(mf)
                continue
            if not mf.destroy(destroy_forcibly_ms, now_ms):
                break
            deleted.append(mf)
            self._remove([mf])
            if sleep is not None and delete_interval_ms > 0:
                sleep(delete_interval_ms / 1000)
        return deleted

    def delete_below(
        self,
        last_entry_ok: Callable[[MappedFile], bool],
        destroy_forcibly_ms: int,
        now_ms: int,
        dry_run: bool = False,
    ) -> list[MappedFile]:
        """Delete leading segments (never the last) for which `last_entry_ok` is False."""
        deleted: list[MappedFile] = []
        for mf in self.files[:-1]:
            if last_entry_ok(mf):
                break
            if dry_run:
                deleted.append(mf)
                continue
            if not mf.destroy(destroy_forcibly_ms, now_ms):
                break
            deleted.append(mf)
            self._remove([mf])
        return deleted

    def destroy(self) -> None:
        """Delete every segment and the directory if empty."""
        with self._lock:
            files, self.files = self.files, []
        for mf in files:
            mf.destroy(0, 0)
        self.flushed_where = 0
        with contextlib.suppress(OSError):
            os.rmdir(self.store_path)

    def close(self) -> None:
        with self._lock:
            for mf in self.files:
                mf.close()
