"""Recovery from the checkpoint's recovery offset: only what follows it is verified."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from engine.store import GetMessageStatus, MessageStore
from engine.store.checkpoint import RECOVERY_SLOTS, StoreCheckpoint, read_recovery_offset
from engine.store.flush import FlushConsumeQueueService
from tests.store.helpers import msg


def _crash_copy(s: MessageStore, dst: Path) -> None:
    """The files of a running store as a SIGKILL would leave them (abort marker too)."""
    shutil.copytree(s.config.store_path_root_dir, dst)
    (dst / "abort").touch()


def _bodies(s: MessageStore, queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    while (r := s.get_message("g", "TopicTest", queue_id, len(out), 32)).messages:
        assert r.status is GetMessageStatus.FOUND
        out += r.messages
    return out


def _keys_found(s: MessageStore, n: int) -> int:
    """How many of key0..key<n-1> the index finds exactly once."""
    return sum(len(s.query_message("TopicTest", f"key{i}", 32, 0, 2**62).messages) == 1
               for i in range(n))  # fmt: skip


def _fill(s: MessageStore, first: int, n: int) -> int:
    end = 0
    for i in range(first, first + n):
        r = s.append_message(msg(i, queue_id=i % 2))
        assert r.ok
        end = r.wrote_offset + r.wrote_bytes
    return end


def test_crash_verifies_only_what_follows_the_checkpoint(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "a")
    checkpointed = _fill(s, 0, 60)
    s.close()  # a clean close writes the checkpoint at the end
    s = make_store(tmp_path / "a")
    assert s.recovery_report is not None and s.recovery_report.from_checkpoint
    assert s.recovery_report.scan_from == checkpointed and s.recovery_report.redispatched == 0
    end = _fill(s, 60, 15)
    expected = [_bodies(s, q) for q in (0, 1)]
    _crash_copy(s, tmp_path / "img")
    s.close()
    c = make_store(tmp_path / "img")
    rep = c.recovery_report
    assert rep is not None and rep.abnormal and rep.from_checkpoint
    assert (rep.scan_from, rep.process_offset, rep.redispatched) == (checkpointed, end, 15)
    assert [_bodies(c, q) for q in (0, 1)] == expected
    assert _keys_found(c, 75) == 75
    r = c.append_message(msg(75, queue_id=1))
    assert r.ok and r.wrote_offset == end and r.queue_offset == 37
    c.close()


def test_queue_and_index_entries_past_the_checkpoint_are_rebuilt_once(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    """A crash after the queues and index got entries the checkpoint does not cover:
    they are cut and rebuilt from the commit log, with no duplicates and no loss, and
    the index chains of keys seen before the checkpoint stay whole."""
    s = make_store(tmp_path / "a")
    _fill(s, 0, 30)
    s.close()
    s = make_store(tmp_path / "a")
    _fill(s, 30, 30)
    _crash_copy(s, tmp_path / "img")
    s.close()
    c = make_store(tmp_path / "img")
    assert c.recovery_report is not None and c.recovery_report.redispatched == 30
    assert [len(_bodies(c, q)) for q in (0, 1)] == [30, 30]
    assert _keys_found(c, 60) == 60
    assert len(c.query_message("TopicTest", "common", 64, 0, 2**62).messages) == 60
    c.close()


def test_a_torn_slot_falls_back_to_the_other_one(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "a")
    older = _fill(s, 0, 20)
    s.close()
    s = make_store(tmp_path / "a")
    newer = _fill(s, 20, 20)
    s.close()
    path = tmp_path / "a" / "checkpoint"
    raw = bytearray(path.read_bytes())
    assert read_recovery_offset(bytes(raw)) == (2, newer)
    at = RECOVERY_SLOTS[2 % 2]
    raw[at + 20] ^= 0xFF  # the newest slot, torn in its offset
    path.write_bytes(bytes(raw))
    (tmp_path / "a" / "abort").touch()
    c = make_store(tmp_path / "a")
    rep = c.recovery_report
    assert rep is not None and rep.from_checkpoint
    assert (rep.scan_from, rep.process_offset, rep.redispatched) == (older, newer, 20)
    assert [len(_bodies(c, q)) for q in (0, 1)] == [20, 20]
    c.close()


def test_without_a_valid_slot_recovery_uses_the_timestamps(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "a")
    _fill(s, 0, 40)
    s.close()
    path = tmp_path / "a" / "checkpoint"
    raw = bytearray(path.read_bytes())
    for at in RECOVERY_SLOTS:
        raw[at : at + 24] = bytes(24)  # as RocketMQ writes it
    path.write_bytes(bytes(raw))
    (tmp_path / "a" / "abort").touch()
    c = make_store(tmp_path / "a")
    assert c.recovery_report is not None and not c.recovery_report.from_checkpoint
    assert [len(_bodies(c, q)) for q in (0, 1)] == [20, 20]
    c.close()
    assert StoreCheckpoint(str(path)).recovery_offset is not None  # written again on close


def test_truncation_lowers_the_checkpoint_first(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    """An HA tail cut below the recovery offset: a crash right after it must not start
    verifying past the records that will replace the cut ones."""
    s = make_store(tmp_path / "a")
    cut = _fill(s, 0, 20)
    end = _fill(s, 20, 20)
    s.close()
    s = make_store(tmp_path / "a")
    assert s.checkpoint is not None and s.checkpoint.recovery_offset == end
    s.truncate_to(cut)
    assert StoreCheckpoint(str(tmp_path / "a" / "checkpoint")).recovery_offset == cut
    _fill(s, 100, 3)
    _crash_copy(s, tmp_path / "img")
    s.close()
    c = make_store(tmp_path / "img")
    assert c.recovery_report is not None and c.recovery_report.scan_from == cut
    assert len(_bodies(c, 0)) == 10 + 2 and len(_bodies(c, 1)) == 10 + 1
    c.close()


def test_the_recovery_offset_never_passes_an_unflushed_queue_entry(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "a")
    cp = s.checkpoint
    assert cp is not None and cp.recovery_offset is None  # a new store
    svc = FlushConsumeQueueService(s.queues, s.index, s.dispatcher, cp, 1000, 1000, 60_000,
                                   s.commit_log.mfq)  # fmt: skip

    def flush_round(pages: int) -> int | None:
        svc._flush(pages, 0, s.dispatcher.reput_from_offset, cp.epoch)
        return StoreCheckpoint(str(tmp_path / "a" / "checkpoint")).recovery_offset

    _fill(s, 0, 10)
    s.commit_log.mfq.flush(0)
    assert flush_round(1000) == 0  # queues below their least pages: nothing is covered
    end = s.get_max_phy_offset()
    assert flush_round(0) == end  # a thorough flush covers everything
    first_new = s.append_message(msg(10, queue_id=0)).wrote_offset
    _fill(s, 11, 5)
    assert flush_round(1000) == end  # the commit log is not flushed yet
    s.commit_log.mfq.flush(0)
    assert flush_round(1000) == first_new  # queue 0's entry for it is not on disk yet
    assert flush_round(0) == s.get_max_phy_offset()
    s.close()
