"""A real SYNC_FLUSH writer process killed with SIGKILL, again and again: no ack is lost."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from engine.protocol.message import decode_record
from engine.store import GetMessageStatus, MessageStore
from tests.store.helpers import msg, small_config

ROUNDS = 6


def _run_writer_until(root: Path, first: int, acks_wanted: int) -> list[list[int]]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_writer", str(root), str(first)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    acks: list[list[int]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ack "):
                acks.append([int(x) for x in line.split()[1:]])
            if len(acks) >= acks_wanted:
                break
        proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    acks += [[int(x) for x in ln.split()[1:]] for ln in rest.splitlines() if ln.startswith("ack ")]
    return acks


def test_sigkill_loses_no_acknowledged_put(tmp_path: Path) -> None:
    root = tmp_path / "store"
    acked: list[list[int]] = []
    first = 0
    for rnd in range(ROUNDS):
        acks = _run_writer_until(root, first, 40 + 25 * rnd)
        assert acks, "the writer acknowledged nothing"
        acked += acks
        first = max(a[0] for a in acked) + 1
        # check a copy: the original stays a crash image for the next writer round
        check = tmp_path / f"check{rnd}"
        shutil.copytree(root, check)
        assert (check / "abort").exists()
        store = MessageStore(small_config(check))
        assert store.load() is False  # abnormal recovery
        try:
            for i, queue_id, queue_offset, phys, size in acked:
                raw = store.look_message_by_offset(phys)
                assert raw is not None and len(raw) == size, (rnd, i, phys)
                rec = decode_record(raw, check_crc=True)
                assert rec.body == msg(i, size=50 + i % 200).body
                assert (rec.queue_id, rec.queue_offset) == (queue_id, queue_offset)
                got = store.get_message("g", "TopicTest", queue_id, queue_offset, 1)
                assert got.status is GetMessageStatus.FOUND and got.messages == [raw]
        finally:
            store.close()
        shutil.rmtree(check)
