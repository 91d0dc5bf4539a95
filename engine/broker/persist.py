"""Writes config snapshots off the event loop: the latest one wins, writes never overlap."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from engine.store.config_files import JsonConfigFile

log = logging.getLogger(__name__)


class Persister:
    """Persists a JSON document produced by `snapshot` to `file`.

    `request()` may be called any number of times; the file is rewritten in a worker thread
    with the newest snapshot, at most one write at a time.  `flush()` writes synchronously
    (start-up and shutdown paths)."""

    def __init__(self, file: JsonConfigFile, snapshot: Callable[[], Any]) -> None:
        self.file = file
        self.snapshot = snapshot
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

    def load(self) -> Any | None:
        return self.file.load()

    def request(self) -> None:
        self._dirty = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())

    async def _drain(self) -> None:
        while self._dirty:
            self._dirty = False
            doc = self.snapshot()
            try:
                await asyncio.to_thread(self.file.persist, doc)
            except Exception:
                log.exception("persisting %s failed", self.file.path)

    def flush(self) -> None:
        self._dirty = False
        self.file.persist(self.snapshot())

    async def wait(self) -> None:
        """Wait for a pending background write (and anything requested meanwhile)."""
        while self._task is not None and not self._task.done():
            await self._task

