"""A real SYNC_FLUSH writer process killed with SIGKILL, again and again: no ack is lost.

Also killed at chosen moments (crash_writer's faults): in the middle of a segment roll and
in the middle of a checkpoint write.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.protocol.message import decode_record
from engine.store import GetMessageStatus, MessageStore
from engine.store.checkpoint import RECOVERY_SLOT, RECOVERY_SLOTS, read_recovery_offset
from tests.store.helpers import msg, small_config

ROUNDS = 6


def _run_writer_until(root: Path, first: int, acks_wanted: int, fault: str = "") -> list[list[int]]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_writer", str(root), str(first), fault],
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
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    acks += [[int(x) for x in ln.split()[1:]] for ln in rest.splitlines() if ln.startswith("ack ")]
    return acks


def _check(root: Path, check: Path, acked: list[list[int]]) -> MessageStore:
    """Recover a copy of the crash image (the original stays one for the next round)
    and find every acknowledged message; returns the recovered store, closed."""
    shutil.copytree(root, check)
    assert (check / "abort").exists()
    store = MessageStore(small_config(check))
    assert store.load() is False  # abnormal recovery
    try:
        for i, queue_id, queue_offset, phys, size in acked:
            raw = store.look_message_by_offset(phys)
            assert raw is not None and len(raw) == size, (i, phys)
            rec = decode_record(raw, check_crc=True)
            assert rec.body == msg(i, size=50 + i % 200).body
            assert (rec.queue_id, rec.queue_offset) == (queue_id, queue_offset)
            got = store.get_message("g", "TopicTest", queue_id, queue_offset, 1)
            assert got.status is GetMessageStatus.FOUND and got.messages == [raw]
    finally:
        store.close()
    shutil.rmtree(check)
    return store


def test_sigkill_loses_no_acknowledged_put(tmp_path: Path) -> None:
    root = tmp_path / "store"
    acked: list[list[int]] = []
    first = 0
    for rnd in range(ROUNDS):
        acks = _run_writer_until(root, first, 40 + 25 * rnd)
        assert acks, "the writer acknowledged nothing"
        acked += acks
        first = max(a[0] for a in acked) + 1
        _check(root, tmp_path / f"check{rnd}", acked)


@pytest.mark.parametrize("fault", ["roll-blank", "roll-new", "checkpoint"])
def test_sigkill_in_a_roll_or_a_checkpoint_write_loses_nothing(tmp_path: Path, fault: str) -> None:
    root = tmp_path / "store"
    acked: list[list[int]] = []
    first = 0
    for rnd in range(2):  # the second writer starts from the first one's crash image
        acks = _run_writer_until(root, first, 1 << 30, fault)
        assert acks, "the writer acknowledged nothing"
        acked += acks
        first = max(a[0] for a in acked) + 1
        if fault == "checkpoint":  # one slot is torn, the other one is used
            raw = (root / "checkpoint").read_bytes()
            slots = [raw[at : at + RECOVERY_SLOT.size] for at in RECOVERY_SLOTS]
            assert read_recovery_offset(raw) is not None
            assert (
                sum(
                    read_recovery_offset(_only(slot, at)) is None
                    for slot, at in zip(slots, RECOVERY_SLOTS, strict=True)
                )
                == 1
            )
        store = _check(root, tmp_path / f"check{rnd}", acked)
        assert store.recovery_report is not None and store.recovery_report.from_checkpoint


def _only(slot: bytes, at: int) -> bytes:
    """A checkpoint image holding just this one slot."""
    return bytes(at) + slot + bytes(4096 - at - len(slot))
