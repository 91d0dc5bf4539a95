"""The broker's periodic duties as small services: offset flush, client expiry, stats."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class PeriodicService:
    """Runs `action` every `interval_s` seconds in one task; a failing round is logged."""

    def __init__(self, name: str, interval_s: Callable[[], float],
                 action: Callable[[], Awaitable[None] | None]) -> None:
        self.name = name
        self.interval_s = interval_s
        self.action = action
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s())
            try:
                result = self.action()
                if result is not None:
                    await result
            except Exception:
                log.exception("%s failed", self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
