"""The index service: builds key entries for dispatched records, answers key + time queries."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from engine.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    java_string_hash,
)
from engine.store.index_file import IndexFile, index_file_name, key_hash
from engine.store.results import DispatchRequest

_U32 = 0xFFFFFFFF
_UNIQ_SPLIT = 20  # a UNIQ_KEY's first 20 hex digits are constant per producer process
_POW31_TAIL = pow(31, 12, 1 << 32)


def _abs_hash(u32: int) -> int:
    """abs() of the signed int32 `u32`; 0 for Integer.MIN_VALUE (indexKeyHashMethod)."""
    if u32 & 0x80000000:
        u32 = 0x100000000 - u32
    return 0 if u32 > 0x7FFFFFFF else u32


class IndexService:
    """Index files under `index_dir`, newest last."""

    def __init__(
        self,
        index_dir: str,
        hash_slot_num: int,
        index_num: int,
        clock: Callable[[], int],
        enabled: bool = True,
    ) -> None:
        self.index_dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.clock = clock
        self.enabled = enabled
        self.files: list[IndexFile] = []
        self.flushed_timestamp = 0  # endTimestamp of the last flushed index file
        self.last_indexed_offset = -1  # physical offset of the newest indexed record
        self._header_ts = 0  # end timestamp in the newest header written
        self._prefix_hashes: dict[str, int] = {}  # "topic#" + UNIQ_KEY[:20] -> hash (u32)
        self._lock = threading.Lock()

    def load(self, last_exit_ok: bool, checkpoint_index_ts: int) -> None:
        """Open the index files; after a crash drop those newer than the checkpoint."""
        if not os.path.isdir(self.index_dir):
            return
        for name in sorted(os.listdir(self.index_dir)):
            if not name.isdigit():
                continue
            f = IndexFile(os.path.join(self.index_dir, name), self.hash_slot_num, self.index_num)
            f.load_header()
            if not last_exit_ok and f.end_timestamp > checkpoint_index_ts:
                f.destroy()
                continue
            self.files.append(f)
            if f.index_count > 1:
                self.last_indexed_offset = max(self.last_indexed_offset, f.end_phy_offset)

    # ---- building
    def _last_file(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_full():
            return files[-1]
        prev = files[-1] if files else None
        os.makedirs(self.index_dir, exist_ok=True)
        now = self.clock()
        path = os.path.join(self.index_dir, index_file_name(now))
        while os.path.exists(path):
            now += 1
            path = os.path.join(self.index_dir, index_file_name(now))
        f = IndexFile(path, self.hash_slot_num, self.index_num)
        if prev is not None:
            f.begin_phy_offset = f.end_phy_offset = prev.end_phy_offset
            f.begin_timestamp = f.end_timestamp = prev.end_timestamp
            prev.write_header()
            prev.flush()
            self.flushed_timestamp = prev.end_timestamp
        with self._lock:
            self.files.append(f)
        return f

    def build_index(self, req: DispatchRequest) -> None:
        """Index `topic#UNIQ_KEY` and `topic#key` for each KEYS key; idempotent."""
        if not self.enabled:
            return
        uniq = req.uniq_key
        keys = req.keys
        if not uniq and not keys:
            return
        if req.sysflag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        if req.commit_log_offset <= self.last_indexed_offset:
            return  # already indexed (re-dispatch during recovery)
        phy = req.commit_log_offset
        self.last_indexed_offset = phy
        ts = req.store_timestamp
        files = self.files
        f = files[-1] if files else self._last_file()
        prefix = req.topic + "#"
        if uniq:
            h = self._uniq_hash(prefix, uniq)
            if not f.put_key(h, phy, ts):
                f = self._last_file()
                f.put_key(h, phy, ts)
        if keys:
            for k in keys.split(" "):
                if k and not f.put_key(key_hash(prefix + k), phy, ts):
                    f = self._last_file()
                    f.put_key(key_hash(prefix + k), phy, ts)

    def build_many(self, reqs: Sequence[DispatchRequest]) -> None:
        """`build_index` for the records of one batch, one index write pass."""
        if not self.enabled:
            return
        entries: list[tuple[int, int, int]] = []
        last = self.last_indexed_offset
        uniq_hash = self._uniq_hash
        for req in reqs:
            phy = req.commit_log_offset
            if phy <= last or req.sysflag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            last = phy
            prefix = req.topic + "#"
            ts = req.store_timestamp
            if req.uniq_key:
                entries.append((uniq_hash(prefix, req.uniq_key), phy, ts))
            if req.keys:
                for k in req.keys.split(" "):
                    if k:
                        entries.append((key_hash(prefix + k), phy, ts))
        self.last_indexed_offset = last
        while entries:
            f = self.files[-1] if self.files else self._last_file()
            done = f.put_keys(entries)
            entries = entries[done:]
            if entries:
                self._last_file()

    def _uniq_hash(self, prefix: str, uniq: str) -> int:
        """key_hash(prefix + uniq), reusing the hash of the constant head of UNIQ_KEYs.

        String.hashCode(a + b) = hashCode(a) * 31^len(b) + hashCode(b) (mod 2^32).
        """
        if len(uniq) != 32 or not uniq.isascii():
            return key_hash(prefix + uniq)
        head = prefix + uniq[:_UNIQ_SPLIT]
        cache = self._prefix_hashes
        ph = cache.get(head)
        if ph is None:
            if len(cache) > 4096:
                cache.clear()
            ph = cache[head] = java_string_hash(head) & _U32
        return _abs_hash((ph * _POW31_TAIL + java_string_hash(uniq[_UNIQ_SPLIT:])) & _U32)

    # ---- queries
    def query(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> tuple[list[int], int, int]:
        """Physical offsets for `key`, newest first; plus the last file's end time/offset."""
        offsets: list[int] = []
        last_ts = last_phy = 0
        h = key_hash(topic + "#" + key)
        files = list(self.files)
        for i, f in enumerate(reversed(files)):
            if i == 0:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                offsets.extend(f.select(h, max_num - len(offsets), begin, end))
            if f.begin_timestamp < begin or len(offsets) >= max_num:
                break
        return offsets, last_ts, last_phy

    # ---- maintenance
    def write_header(self) -> None:
        """Write the newest file's header (owner thread, before `flush`)."""
        if self.files:
            f = self.files[-1]
            f.write_header()
            self._header_ts = f.end_timestamp

    def flush(self) -> int:
        """fdatasync the newest file; returns its end timestamp (checkpoint indexMsgTimestamp).

        Only what `write_header()` wrote before counts: the end timestamp reported is the
        one of that header.
        """
        files = list(self.files)
        if files:
            ts = self._header_ts
            files[-1].flush()
            self.flushed_timestamp = max(self.flushed_timestamp, ts)
        return self.flushed_timestamp

    def delete_expired(self, commit_log_min: int, dry_run: bool = False) -> list[IndexFile]:
        """Delete files (never the last) whose endPhyOffset < commit-log min offset."""
        doomed = [f for f in self.files[:-1] if f.end_phy_offset < commit_log_min]
        if not dry_run and doomed:
            with self._lock:
                self.files = [f for f in self.files if f not in doomed]
            for f in doomed:
                f.destroy()
        return doomed

    def truncate(self, phy_offset: int) -> None:
        """Drop files whose entries start at or past `phy_offset` (torn commit-log tail)."""
        self.last_indexed_offset = min(self.last_indexed_offset, phy_offset - 1)
        doomed = [f for f in self.files if f.begin_phy_offset >= phy_offset and f.index_count > 1]
        if doomed:
            with self._lock:
                self.files = [f for f in self.files if f not in doomed]
            for f in doomed:
                f.destroy()

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for f in files:
            f.destroy()

    def close(self) -> None:
        for f in self.files:
            f.close()
