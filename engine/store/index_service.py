"""The index service: builds key entries for dispatched records, answers key + time queries."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from engine.protocol import native
from engine.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    java_string_hash,
)
from engine.store.index_file import IndexFile, index_file_name, key_hash, key_hashes
from engine.store.results import DispatchRequest

_U32 = 0xFFFFFFFF
# A UNIQ_KEY (MessageClientIDSetter) is 32 hex digits: 20 constant per producer process, 8 of
# milliseconds (constant within a millisecond) and a 4-digit counter.  Its hash is split there.
_UNIQ_LENGTH = 32
_UNIQ_SPLIT = 28
_POW31_TAIL = pow(31, _UNIQ_LENGTH - _UNIQ_SPLIT, 1 << 32)
_HEAD_CACHE_MAX = 4096
_TAIL_CACHE_MAX = 1 << 16  # every 4-hex-digit counter


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
        # "topic#" + UNIQ_KEY[:28] -> its hash (u32) * 31^4; UNIQ_KEY[28:] -> its hash
        self._head_hashes: dict[str, int] = {}
        self._tail_hashes: dict[str, int] = {}
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
        self.build_many((req,))

    def build_many(self, reqs: Sequence[DispatchRequest]) -> None:
        """`build_index` for the records of puts made together (rising commit-log offsets,
        any topics), one index write pass."""
        if not self.enabled:
            return
        entries: list[tuple[int, int, int]] = []
        last = self.last_indexed_offset
        for topic, _q, phy, _s, _t, ts, _qo, keys, uniq, sysflag, _p in reqs:
            if not (uniq or keys) or phy <= last:
                continue
            if sysflag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            last = phy
            self._entries_of(entries, topic + "#", phy, ts, uniq, keys)
        self.last_indexed_offset = last
        self._put_entries(entries)

    def build_batch(
        self,
        topic: str,
        sysflag: int,
        offsets: Sequence[int],
        keys: Sequence[str],
        uniq_keys: Sequence[str | None],
        timestamp: int,
    ) -> None:
        """`build_index` for the records of one batch put (one topic, sysflag and store
        time; rising commit-log `offsets`), one index write pass."""
        if not self.enabled or sysflag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        prefix = topic + "#"
        entries: list[tuple[int, int, int]] = []
        last = self.last_indexed_offset
        for phy, uniq, record_keys in zip(offsets, uniq_keys, keys, strict=True):
            if phy <= last:
                continue
            last = phy
            self._entries_of(entries, prefix, phy, timestamp, uniq, record_keys)
        self.last_indexed_offset = last
        self._put_entries(entries)

    def _entries_of(self, entries: list[tuple[int, int, int]], prefix: str, phy: int, ts: int,
                    uniq: str | None, keys: str) -> None:
        """Add the (hash, offset, time) entries of one record: `prefix` + its UNIQ_KEY and
        + each of its KEYS."""
        if uniq:
            entries.append((self._uniq_hash(prefix, uniq), phy, ts))
        if keys:
            hashes = native.key_hashes(prefix, keys) if native.key_hashes is not None else None
            if hashes is None:
                hashes = key_hashes(prefix, keys)
            entries.extend([(h, phy, ts) for h in hashes])

    def _put_entries(self, entries: list[tuple[int, int, int]]) -> None:
        """Append (hash, offset, time) entries, rolling to a new index file when full."""
        while entries:
            f = self.files[-1] if self.files else self._last_file()
            done = f.put_keys(entries)
            entries = entries[done:]
            if entries:
                self._last_file()

    def _uniq_hash(self, prefix: str, uniq: str) -> int:
        """key_hash(prefix + uniq), from cached hashes of the UNIQ_KEY's head and tail.

        String.hashCode(a + b) = hashCode(a) * 31^len(b) + hashCode(b) (mod 2^32); the tail
        must be ASCII for len(b) to count UTF-16 units.
        """
        if len(uniq) != _UNIQ_LENGTH:
            return key_hash(prefix + uniq)
        tail = uniq[_UNIQ_SPLIT:]
        th = self._tail_hashes.get(tail)
        if th is None:
            th = self._tail_hash(tail)
            if th < 0:
                return key_hash(prefix + uniq)
        head = prefix + uniq[:_UNIQ_SPLIT]
        ph = self._head_hashes.get(head)
        if ph is None:
            ph = self._head_hash(head)
        h = (ph + th) & _U32
        if h & 0x80000000:  # abs() of the int32; 0 for Integer.MIN_VALUE
            return 0x100000000 - h if h != 0x80000000 else 0
        return h

    def _tail_hash(self, tail: str) -> int:
        """Hash of a UNIQ_KEY tail, cached; -1 if it is not ASCII."""
        if not tail.isascii():
            return -1
        cache = self._tail_hashes
        if len(cache) >= _TAIL_CACHE_MAX:
            cache.clear()
        th = cache[tail] = java_string_hash(tail) & _U32
        return th

    def _head_hash(self, head: str) -> int:
        """Hash of "topic#" + a UNIQ_KEY head, times 31^len(tail), cached."""
        cache = self._head_hashes
        if len(cache) >= _HEAD_CACHE_MAX:
            cache.clear()
        ph = cache[head] = (java_string_hash(head) * _POW31_TAIL) & _U32
        return ph

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
        """Drop the entries of records at or past `phy_offset`: files that start there,
        and the newest entries of the file before them."""
        self.last_indexed_offset = min(self.last_indexed_offset, phy_offset - 1)
        doomed = [f for f in self.files if f.begin_phy_offset >= phy_offset and f.index_count > 1]
        if doomed:
            with self._lock:
                self.files = [f for f in self.files if f not in doomed]
            for f in doomed:
                f.destroy()
        for f in reversed(self.files):
            f.truncate(phy_offset)
            if f.index_count > 1:
                break
        self._header_ts = 0

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for f in files:
            f.destroy()

    def close(self) -> None:
        for f in self.files:
            f.close()
