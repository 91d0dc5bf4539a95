"""One index file: a header, a hash-slot table and slot-chained entries (key -> offset).

    header (40 bytes)                    entry (20 bytes), entry n at 40 + slots*4 + n*20
    offset size field                    offset size field
         0    8 beginTimestamp                0    4 keyHash (non-negative)
         8    8 endTimestamp                  4    8 commit-log physical offset
        16    8 beginPhyOffset               12    4 timeDiff (s since beginTimestamp)
        24    8 endPhyOffset                 16    4 previous entry number (0 = end)
        32    4 hashSlotCount
        36    4 indexCount (starts at 1)
    slot table: hashSlotNum int32 at 40, value = newest entry number of the slot (0 = empty)

Files are named by their creation time, `yyyyMMddHHmmssSSS` in local time.
"""

from __future__ import annotations

import mmap
import struct
import time

from engine.protocol import native
from engine.protocol.message import java_string_hash
from engine.store.mapped_file import MappedFile

INDEX_HEADER = struct.Struct(
    ">"
    "q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
assert INDEX_HEADER.size == 40
INDEX_SLOT = struct.Struct(">i")  # newest entry number of the slot
assert INDEX_SLOT.size == 4
INDEX_ENTRY = struct.Struct(
    ">"
    "i"  # keyHash
    "q"  # physical offset
    "i"  # timeDiff in seconds
    "i"  # previous entry number
)
assert INDEX_ENTRY.size == 20
INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
_INT_MAX = 0x7FFFFFFF


def index_file_name(ms: int) -> str:
    """Creation time as yyyyMMddHHmmssSSS (local time)."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms / 1000)) + f"{ms % 1000:03d}"


def key_hash(key: str) -> int:
    """abs(String.hashCode(key)), 0 for Integer.MIN_VALUE."""
    h = abs(java_string_hash(key))
    return 0 if h > _INT_MAX else h


def key_hashes(prefix: str, keys: str) -> list[int]:
    """`key_hash(prefix + k)` of each key of a KEYS value (space-separated, empties skipped):
    the reference of the native `key_hashes` (engine.protocol.native)."""
    return [key_hash(prefix + k) for k in keys.split(" ") if k]


def put_entries(mm: mmap.mmap | bytearray, entries_at: int, slots: int, count: int, begin: int,
                entries: list[tuple[int, int, int]]) -> int:
    """Append (hash, offset, time) entries from entry number `count` on, each chained to its
    slot's newest entry and made its slot's head; returns how many slots were empty.

    The caller checks they fit.  The reference of the native `index_put`
    (engine.protocol.native).
    """
    new_slots = 0
    unpack_slot = INDEX_SLOT.unpack_from
    pack_slot = INDEX_SLOT.pack_into
    pack_entry = INDEX_ENTRY.pack_into
    at = entries_at + count * INDEX_ENTRY_SIZE
    diff_ts = diff = -1  # timeDiff of store time diff_ts: the keys of a batch share one
    for khash, phy, ts in entries:
        slot_pos = INDEX_HEADER_SIZE + (khash % slots) * HASH_SLOT_SIZE
        (prev,) = unpack_slot(mm, slot_pos)
        if prev <= 0 or prev > count:
            prev = 0
            new_slots += 1
        if ts != diff_ts:
            diff_ts = ts
            diff = (ts - begin) // 1000 if begin > 0 else 0
            if diff < 0 or diff > _INT_MAX:
                diff = 0 if diff < 0 else _INT_MAX
        pack_entry(mm, at, khash, phy, diff, prev)
        pack_slot(mm, slot_pos, count)
        count += 1
        at += INDEX_ENTRY_SIZE
    return new_slots


class IndexFile:
    """An index file mapped in full; the header is kept in memory and written on each put."""

    def __init__(self, path: str, hash_slot_num: int, index_num: int) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        self.mf = MappedFile(path, size)
        self.mf.wrote_position = size
        self.begin_timestamp = 0
        self.end_timestamp = 0
        self.begin_phy_offset = 0
        self.end_phy_offset = 0
        self.hash_slot_count = 0
        self.index_count = 1
        self._entries_at = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE

    @property
    def path(self) -> str:
        return self.mf.file_name

    def load_header(self) -> None:
        (
            self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        ) = INDEX_HEADER.unpack_from(self.mf.mm, 0)  # fmt: skip
        # Entries past a stale header count (crash before the header was written) are
        # recovered by following the chain: count entries until an all-zero one.
        count = max(1, self.index_count)
        mm = self.mf.mm
        while count < self.index_num:
            at = self._entries_at + count * INDEX_ENTRY_SIZE
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(mm, at)
            if h == 0 and phy == 0 and diff == 0 and prev == 0:
                break
            if phy < self.end_phy_offset and count > 1:
                break
            self.end_phy_offset = phy
            self.end_timestamp = max(self.end_timestamp, self.begin_timestamp + diff * 1000)
            count += 1
        self.index_count = count
        self.index_count = max(1, self.index_count)

    def write_header(self) -> None:
        """Write the in-memory header (owner thread; before a flush and on close)."""
        INDEX_HEADER.pack_into(
            self.mf.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, khash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry for a key hash; False when the file is full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        mm = self.mf.mm
        slot_pos = INDEX_HEADER_SIZE + (khash % self.hash_slot_num) * HASH_SLOT_SIZE
        (prev,) = INDEX_SLOT.unpack_from(mm, slot_pos)
        if prev <= 0 or prev > count:
            prev = 0
            self.hash_slot_count += 1
        begin = self.begin_timestamp
        diff = (store_timestamp - begin) // 1000 if begin > 0 else 0
        if diff < 0 or diff > _INT_MAX:
            diff = 0 if diff < 0 else _INT_MAX
        INDEX_ENTRY.pack_into(
            mm, self._entries_at + count * INDEX_ENTRY_SIZE, khash, phy_offset, diff, prev
        )
        INDEX_SLOT.pack_into(mm, slot_pos, count)
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
            self.write_header()  # the begin fields must be on disk before any entry is used
        return True

    def put_keys(self, entries: list[tuple[int, int, int]]) -> int:
        """`put_key` for many (hash, offset, time) in order; returns how many fitted."""
        done = 0
        n = len(entries)
        while done < n and self.index_count <= 1:  # the first entry also sets the header
            if not self.put_key(*entries[done]):
                return done
            done += 1
        count = self.index_count
        todo = entries[done : done + max(0, self.index_num - count)]
        if not todo:
            return done
        _h, phy, ts = todo[-1]
        put = native.index_put
        new_slots = None if put is None else put(self.mf.mm, self._entries_at,
                                                 self.hash_slot_num, count, self.begin_timestamp,
                                                 todo)
        if new_slots is None:
            new_slots = put_entries(self.mf.mm, self._entries_at, self.hash_slot_num, count,
                                    self.begin_timestamp, todo)
        self.end_phy_offset = phy
        self.end_timestamp = ts
        self.hash_slot_count += new_slots
        self.index_count = count + len(todo)
        return done + len(todo)

    def truncate(self, phy_offset: int) -> int:
        """Drop the entries of records at or past `phy_offset`; returns how many.

        Entries are appended in commit-log order, so they are the newest ones: a binary
        search finds the first, and each slot that points at a dropped entry is walked
        back along its chain to the newest entry kept.  The work is proportional to the
        entries dropped, not to the file.
        """
        mm = self.mf.mm
        at = self._entries_at
        count = self.index_count
        lo, hi = 1, count
        while lo < hi:
            mid = (lo + hi) // 2
            if INDEX_ENTRY.unpack_from(mm, at + mid * INDEX_ENTRY_SIZE)[1] < phy_offset:
                lo = mid + 1
            else:
                hi = mid
        keep = lo
        if keep >= count:
            return 0
        slots = self.hash_slot_num
        for n in range(count - 1, keep - 1, -1):
            khash = INDEX_ENTRY.unpack_from(mm, at + n * INDEX_ENTRY_SIZE)[0]
            slot_pos = INDEX_HEADER_SIZE + (khash % slots) * HASH_SLOT_SIZE
            (head,) = INDEX_SLOT.unpack_from(mm, slot_pos)
            if head < keep:
                continue
            while keep <= head < count:  # prev links only ever point back
                prev = INDEX_ENTRY.unpack_from(mm, at + head * INDEX_ENTRY_SIZE)[3]
                head = prev if 0 <= prev < head else 0
            if head >= count or head < 0:
                head = 0
            INDEX_SLOT.pack_into(mm, slot_pos, head)
            if head == 0:
                self.hash_slot_count = max(0, self.hash_slot_count - 1)
        mm[at + keep * INDEX_ENTRY_SIZE : at + count * INDEX_ENTRY_SIZE] = bytes(
            (count - keep) * INDEX_ENTRY_SIZE
        )
        self.index_count = keep
        if keep > 1:
            _h, phy, diff, _p = INDEX_ENTRY.unpack_from(mm, at + (keep - 1) * INDEX_ENTRY_SIZE)
            self.end_phy_offset = phy
            # timeDiff has whole seconds: the end may be up to 999 ms late (query windows
            # only widen)
            self.end_timestamp = self.begin_timestamp + diff * 1000 + 999
        else:
            self.end_phy_offset = self.begin_phy_offset
            self.end_timestamp = self.begin_timestamp
        self.write_header()
        return count - keep

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select(self, khash: int, max_num: int, begin: int, end: int) -> list[int]:
        """Physical offsets of entries with this key hash stored within [begin, end]."""
        out: list[int] = []
        mm = self.mf.mm
        count = self.index_count
        (nxt,) = INDEX_SLOT.unpack_from(
            mm, INDEX_HEADER_SIZE + (khash % self.hash_slot_num) * HASH_SLOT_SIZE
        )
        if nxt <= 0 or nxt > count or count <= 1:
            return out
        seen = 0
        while len(out) < max_num and seen < count:
            seen += 1
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(
                mm, self._entries_at + nxt * INDEX_ENTRY_SIZE
            )
            t = self.begin_timestamp + diff * 1000
            if h == khash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or t < begin:
                break
            nxt = prev
        return out

    def flush(self) -> None:
        """fdatasync (call `write_header()` first, on the owner thread)."""
        self.mf.flushed_position = 0
        self.mf.flush()

    def close(self) -> None:
        if not self.mf.closed:
            self.write_header()
        self.mf.close()

    def destroy(self) -> None:
        self.mf.destroy(0, 0)
