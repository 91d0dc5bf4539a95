"""Comparing two stores: commit-log bytes and consume-queue entries."""

from __future__ import annotations

from engine.store import MessageStore

QueueEntries = dict[tuple[str, int], dict[int, tuple[int, int, int]]]


def commit_log_bytes(store: MessageStore, start: int, end: int) -> bytes:
    out = bytearray()
    pos = start
    while pos < end:
        chunk = store.read_commit_log(pos, end - pos)
        assert chunk, f"no commit-log bytes at {pos} (log ends at {end})"
        out += chunk
        pos += len(chunk)
    return bytes(out)


def queue_entries(store: MessageStore, from_offset: int = 0) -> QueueEntries:
    """Every consume-queue entry pointing at or past `from_offset`, by queue and offset."""
    out: QueueEntries = {}
    for cq in store.queues:
        entries = {}
        for logical in range(cq.min_offset, cq.max_offset):
            entry = cq.get_entry(logical)
            if entry is not None and entry[0] >= from_offset and entry[1] != 0x7FFFFFFF:
                entries[logical] = entry
        if entries:
            out[(cq.topic, cq.queue_id)] = entries
    return out


def assert_same_stores(master: MessageStore, slave: MessageStore, from_offset: int = 0) -> None:
    end = master.get_max_phy_offset()
    assert slave.get_max_phy_offset() == end
    assert commit_log_bytes(slave, from_offset, end) == commit_log_bytes(master, from_offset, end)
    assert queue_entries(slave, from_offset) == queue_entries(master, from_offset)
    assert queue_entries(master, from_offset)  # the comparison saw something
