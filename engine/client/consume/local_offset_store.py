"""Broadcasting consumers' offsets in a local file (Java's `LocalFileOffsetStore`).

How this works (client-behaviour.md §9): every consumer of a broadcasting group reads all
queues, so its progress is its own and never goes to a broker.  The file is
``<dir>/<clientId>/<group>/offsets.json`` holding `{"offsetTable":{<queue>:<offset>}}`
written as fastjson does (queue objects as unquoted keys, TAB-indented), replaced the way
`MixAll.string2File` does: write ``.tmp``, copy the old file to ``.bak``, rename.  Loading
falls back to ``.bak`` when the file is missing or unreadable.  File I/O runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.client.consume.offset_store import NO_OFFSET, ReadOffsetType, read_offset, update_table
from engine.protocol import fastjson
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.errors import ProtocolError
from engine.protocol.wire import from_json, to_json

log = logging.getLogger(__name__)


def default_store_dir() -> Path:
    return Path(os.path.expanduser("~")) / ".rocketmq_offsets"


@dataclass(frozen=True, slots=True)
class OffsetSerializeWrapper:
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


def _read(path: Path) -> dict[MessageQueue, int] | None:
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text("utf-8")
        except OSError:
            continue
        if not text.strip():
            continue
        try:
            return dict(from_json(OffsetSerializeWrapper, fastjson.loads(text)).offset_table)
        except ProtocolError as exc:
            log.warning("offset file %s does not decode: %s", candidate, exc)
    return None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    try:
        previous = path.read_text("utf-8")
    except OSError:
        previous = None
    if previous is not None:
        path.with_name(path.name + ".bak").write_text(previous, "utf-8")
    os.replace(tmp, path)


class LocalFileOffsetStore:
    def __init__(self, store_dir: Path | str | None, client_id: str, group: str) -> None:
        base = Path(store_dir) if store_dir is not None else default_store_dir()
        self.path = base / client_id / group / "offsets.json"
        self.table: dict[MessageQueue, int] = {}
        self._write_lock = asyncio.Lock()

    async def load(self) -> None:
        stored = await asyncio.to_thread(_read, self.path)
        if stored:
            self.table.update(stored)

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        update_table(self.table, mq, offset, increase_only)

    async def read(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        return await read_offset(self.table, mq, kind, self._read_stored)

    async def _read_stored(self, mq: MessageQueue) -> int:
        """The offset of `mq` in the file (or its ``.bak``)."""
        stored = await asyncio.to_thread(_read, self.path)
        offset = (stored or {}).get(mq)
        return NO_OFFSET if offset is None else offset

    async def persist_all(self, mqs: Iterable[MessageQueue], *, final: bool = False) -> None:
        held = set(mqs)
        table = {mq: offset for mq, offset in self.table.items() if mq in held}
        if not table:
            return
        text = fastjson.dumps(to_json(OffsetSerializeWrapper(table)), pretty=True)
        async with self._write_lock:
            try:
                await asyncio.to_thread(_write, self.path, text)
            except OSError as exc:
                log.warning("offsets not written to %s: %s", self.path, exc)

    async def persist(self, mq: MessageQueue) -> None:
        return None  # Java writes the whole table in persist_all only

    def remove(self, mq: MessageQueue) -> None:
        return None  # kept: a broadcasting consumer resumes every queue
