"""The offline inspector on a store directory."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.store import MessageStore
from engine.store.consume_queue import CQ_ENTRY
from engine.store.inspect import inspect_store, main, render
from tests.store.helpers import msg


async def _store(make_store: Callable[..., MessageStore], root: Path) -> None:
    s = make_store(root)
    await s.start()
    for i in range(60):
        assert (await s.put_message(msg(i, queue_id=i % 3, size=150))).ok
    await s.shutdown()


async def test_inspector_reports_a_consistent_store(
    make_store: Callable[..., MessageStore], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await _store(make_store, tmp_path / "s")
    assert main([str(tmp_path / "s"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert sum(s["records"] for s in rep["segments"]) == 60
    assert all(s["ends_with_blank"] for s in rep["segments"][:-1])
    assert rep["segments"][0]["first_store_time"] > 0
    assert {(q["topic"], q["queue_id"], q["max_offset"], q["checked"]) for q in rep["queues"]} == {
        ("TopicTest", 0, 20, 20), ("TopicTest", 1, 20, 20), ("TopicTest", 2, 20, 20)
    }
    assert rep["problems"] == [] and rep["index_files"] and rep["checkpoint"]
    last = rep["segments"][-1]
    end = int(last["name"]) + last["bytes_used"]
    assert rep["checkpoint"]["recoveryOffset"] == end  # a clean shutdown: the log's end
    out = subprocess.run(
        [sys.executable, "-m", "engine.store.inspect", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "60 records" in out.stdout and "no problems found" in out.stdout


async def test_inspector_finds_crc_and_queue_problems(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    await _store(make_store, tmp_path / "s")
    seg = tmp_path / "s" / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[88 + 5] ^= 0xFF  # a body byte of the first record
    seg.write_bytes(bytes(data))
    cq = tmp_path / "s" / "consumequeue" / "TopicTest" / "1" / "00000000000000000000"
    entries = bytearray(cq.read_bytes())
    phy, size, tags = CQ_ENTRY.unpack_from(entries, 20)
    CQ_ENTRY.pack_into(entries, 20, phy, size + 1, tags)
    cq.write_bytes(bytes(entries))
    rep = inspect_store(str(tmp_path / "s"))
    assert any("body CRC mismatch" in p for p in rep.problems)
    assert any("TopicTest/1 offset 1: size" in p for p in rep.problems)
    assert main([str(tmp_path / "s")]) == 1
    assert main([str(tmp_path / "nothing")]) == 2


async def test_inspector_ends_the_log_at_a_zero_tail_before_a_preallocated_segment(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    """A live or crashed Apache store: the next segment is pre-allocated, all zeros."""
    s = make_store(tmp_path / "s")
    await s.start()
    for i in range(5):
        assert (await s.put_message(msg(i, size=150))).ok
    await s.shutdown()
    commit = tmp_path / "s" / "commitlog"
    (seg,) = sorted(commit.iterdir())
    size = seg.stat().st_size
    (commit / f"{size:020d}").write_bytes(bytes(size))
    rep = inspect_store(str(tmp_path / "s"))
    assert rep.problems == []
    first, empty = rep.segments
    end = first.bytes_used
    assert (first.records, empty.records, empty.bytes_used) == (5, 0, 0)
    assert first.log_end == end and empty.log_end == end
    text = render(rep)
    assert f"log ends at offset {end}, the rest of the segment is unwritten" in text
    assert f"unwritten (pre-allocated), the log ends at offset {end}" in text
    assert main([str(tmp_path / "s")]) == 0

    data = bytearray(seg.read_bytes())
    data[end + 100] = 7  # a torn tail (a page written after a crash): recovery drops it
    seg.write_bytes(bytes(data))
    rep = inspect_store(str(tmp_path / "s"))
    assert rep.problems == [] and rep.segments[0].log_end == end
    assert rep.segments[0].note == (
        f"log ends at offset {end}; non-zero bytes from offset {end + 100} on, which recovery "
        "drops")

    data[first.bytes_used // 5 * 2 + 4 : first.bytes_used // 5 * 2 + 8] = b"\x12\x34\x56\x78"
    seg.write_bytes(bytes(data))  # a non-zero bad magic in the middle is still corruption
    rep = inspect_store(str(tmp_path / "s"))
    assert rep.problems[0] == f"segment {first.name}: offset {end // 5 * 2}: bad magic 0x12345678"
    assert main([str(tmp_path / "s")]) == 1


async def test_inspector_reports_records_after_the_end_of_the_log(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    await _store(make_store, tmp_path / "s")
    first = sorted((tmp_path / "s" / "commitlog").iterdir())[0]
    size = first.stat().st_size
    first.write_bytes(bytes(size))  # zeroed: the log ends at 0, later segments hold records
    rep = inspect_store(str(tmp_path / "s"))
    assert rep.segments[0].log_end == 0
    assert f"segment {size:020d}: records after the end of the log at offset 0" in rep.problems
