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
from engine.store.inspect import inspect_store, main
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
