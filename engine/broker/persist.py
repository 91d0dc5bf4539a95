"""Writes config snapshots off the event loop: the latest one wins, writes never overlap."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class Persister(Generic[T]):
    """Takes `snapshot()` on the event loop and hands it to `write` in a worker thread.

    `request()` may be called any number of times; the newest snapshot is written, at most one
    write at a time.  `flush()` writes synchronously (start-up and shutdown paths)."""

    def __init__(self, snapshot: Callable[[], T], write: Callable[[T], None], name: str) -> None:
        self.snapshot = snapshot
        self.write = write
        self.name = name
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

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
            value = self.snapshot()
            try:
                await asyncio.to_thread(self.write, value)
            except Exception:
                log.exception("persisting %s failed", self.name)

    def flush(self) -> None:
        self._dirty = False
        self.write(self.snapshot())

    async def wait(self) -> None:
        """Wait for a pending background write (and anything requested meanwhile)."""
        while self._task is not None and not self._task.done():
            await self._task
