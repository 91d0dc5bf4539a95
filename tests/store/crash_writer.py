"""A SYNC_FLUSH writer for the kill -9 tests: prints one line per acknowledged put.

Usage: python -m tests.store.crash_writer STORE_DIR FIRST_INDEX [FAULT]
Line format: `ack <index> <queue id> <queue offset> <physical offset> <size>`.

FAULT makes the process SIGKILL itself at a chosen moment instead of waiting for the
test's signal: `roll-blank` (a segment just closed with its blank record, the next one
not created yet), `roll-new` (the next segment created, nothing written to it yet) or
`checkpoint` (half of a checkpoint recovery slot written).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from engine.store import FlushDiskType, MessageStore
from engine.store.checkpoint import StoreCheckpoint
from engine.store.commit_log import CommitLog
from engine.store.mapped_file import MappedFile
from tests.store.helpers import msg, small_config

# let some rolls or checkpoints go through first (so that rolls happen after checkpoints)
ROLLS_BEFORE_FAULT = 30
CHECKPOINTS_BEFORE_FAULT = 5


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install_fault(fault: str) -> None:
    calls = 0
    if fault.startswith("roll-"):
        segment_for = CommitLog._segment_for

        def rolling(self: CommitLog, size: int) -> MappedFile:
            nonlocal calls
            mf = self.mfq.last
            if mf is None or size + 8 <= mf.remaining():
                return segment_for(self, size)
            calls += 1
            if calls >= ROLLS_BEFORE_FAULT and fault == "roll-blank":
                mf.mm[mf.wrote_position : mf.wrote_position + 8] = mf.remaining().to_bytes(
                    4, "big"
                ) + 0xCBD43194.to_bytes(4, "big")
                _die()
            new = segment_for(self, size)
            if calls >= ROLLS_BEFORE_FAULT:
                _die()
            return new

        CommitLog._segment_for = rolling  # type: ignore[method-assign]
    elif fault == "checkpoint":
        write_slot = StoreCheckpoint._write_slot

        def torn(self: StoreCheckpoint, offset: int) -> None:
            nonlocal calls
            calls += 1
            if calls < CHECKPOINTS_BEFORE_FAULT:
                write_slot(self, offset)
                return
            mm: Any = self._mm
            before = bytes(mm[2048:4096])
            write_slot(self, offset)
            after = bytes(mm[2048:4096])
            mm[2048:4096] = before  # undo, then redo only the first half of the change
            changed = [i for i in range(len(after)) if after[i] != before[i]]
            for i in changed[: len(changed) // 2]:
                mm[2048 + i] = after[i]
            _die()

        StoreCheckpoint._write_slot = torn  # type: ignore[method-assign]
    elif fault:
        raise SystemExit(f"unknown fault {fault!r}")


async def run(root: Path, first: int, fault: str) -> None:
    install_fault(fault)
    store = MessageStore(
        small_config(
            root, flush_disk_type=FlushDiskType.SYNC_FLUSH, flush_interval_consume_queue=20
        )
    )
    store.load()
    await store.start()
    out = sys.stdout
    counter = iter(range(first, first + 10_000_000))

    async def writer(queue_id: int) -> None:
        while True:
            i = next(counter)
            r = await store.put_message(msg(i, queue_id=queue_id, size=50 + i % 200))
            if not r.ok:
                print(f"error {i} {r.status.value} {r.error_message}", file=sys.stderr)
                continue
            out.write(f"ack {i} {queue_id} {r.queue_offset} {r.wrote_offset} {r.wrote_bytes}\n")
            out.flush()

    await asyncio.gather(*(writer(q % 4) for q in range(16)))


if __name__ == "__main__":
    asyncio.run(run(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
