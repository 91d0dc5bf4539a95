"""The store's replication hooks: raw appends at an offset, reads by segment, the put hook,
refused writes, truncation and the slave -> master role change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.store import MessageStore
from engine.store.config import BrokerRole
from engine.store.results import PutMessageStatus
from tests.store.helpers import msg, small_config

Make = Callable[[str], MessageStore]


def make_store(tmp_path: Path) -> Make:
    def make(name: str, role: BrokerRole = BrokerRole.ASYNC_MASTER) -> MessageStore:
        store = MessageStore(small_config(tmp_path / name, broker_role=role))
        store.load()
        return store
    return make


def log_bytes(store: MessageStore, start: int) -> bytes:
    out = b""
    while (chunk := store.read_commit_log(start + len(out), 1 << 20)):
        out += chunk
    return out


def test_raw_appends_start_an_empty_log_anywhere_and_roll_at_boundaries(tmp_path: Path) -> None:
    new = make_store(tmp_path)
    master = new("master")
    for i in range(40):
        master.append_message(msg(i, queue_id=i % 2, size=150))
    size = master.config.mapped_file_size_commit_log
    entry = master.get_queue_entry("TopicTest", 0, 7)
    assert entry is not None
    start = entry[0]  # a record boundary inside the 2nd+ segment, not a segment start
    assert start % size and start > size
    data = log_bytes(master, start)
    assert master.read_commit_log(master.get_max_phy_offset(), 10) == b""
    assert master.read_commit_log(master.get_max_phy_offset() + 10, 10) == b""
    slave = new("slave", BrokerRole.SLAVE)
    pos = start
    for chunk in (data[i:i + 1000] for i in range(0, len(data), 1000)):
        mf = master.commit_log.mfq.find(pos)
        assert mf is not None
        room = mf.file_end_offset - pos  # what the master sends fits one segment
        for piece in (chunk[:room], chunk[room:]):
            if piece:
                assert slave.append_raw(piece, pos) >= 0
                pos += len(piece)
    assert slave.append_raw(b"x", start) == -1  # not at the end any more
    assert slave.get_min_phy_offset() == start - start % size
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    assert log_bytes(slave, start) == data
    assert slave.get_queue_entry("TopicTest", 0, 7) == entry
    assert slave.get_queue_entry("TopicTest", 0, 19) == master.get_queue_entry("TopicTest", 0, 19)
    master.close()
    slave.close()


def test_put_hook_refusal_truncation_and_promotion(tmp_path: Path) -> None:
    new = make_store(tmp_path)
    master = new("master")
    calls: list[tuple[int, int]] = []
    master.on_append = lambda end, count: calls.append((end, count))
    r = master.append_message(msg(1))
    assert calls == [(r.wrote_offset + r.wrote_bytes, 1)]
    master.writes_refused = "fenced for a test"
    refused = master.append_message(msg(2))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert refused.error_message == "fenced for a test" and len(calls) == 1
    master.writes_refused = None
    for i in range(3, 12):
        master.append_message(msg(i))
    data = log_bytes(master, 0)

    slave = new("slave", BrokerRole.SLAVE)
    cut = len(data) - 37  # the last record arrives only in part
    assert slave.append_raw(data[:cut], 0) == 9
    assert slave.complete_records_end() < slave.get_max_phy_offset()
    slave.change_role(BrokerRole.SYNC_MASTER)  # drops the partial record, then writes go on
    assert slave.get_max_phy_offset() == slave.complete_records_end()
    put = slave.append_message(msg(99))
    assert put.status is PutMessageStatus.PUT_OK and put.queue_offset == 9
    assert slave.get_max_offset_in_queue("TopicTest", 0) == 10

    entry = master.get_queue_entry("TopicTest", 0, 4)
    assert entry is not None
    master.truncate_to(entry[0])
    assert master.get_max_phy_offset() == entry[0]
    assert master.get_max_offset_in_queue("TopicTest", 0) == 4
    assert master.append_message(msg(50)).queue_offset == 4
    master.close()
    slave.close()
