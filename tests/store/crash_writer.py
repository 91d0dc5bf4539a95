"""A SYNC_FLUSH writer for the kill -9 test: prints one line per acknowledged put.

Usage: python -m tests.store.crash_writer STORE_DIR FIRST_INDEX
Line format: `ack <index> <queue id> <queue offset> <physical offset> <size>`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine.store import FlushDiskType, MessageStore
from tests.store.helpers import msg, small_config


async def run(root: Path, first: int) -> None:
    store = MessageStore(small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
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
    asyncio.run(run(Path(sys.argv[1]), int(sys.argv[2])))
