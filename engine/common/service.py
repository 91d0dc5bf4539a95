"""A background loop as a small Service: start()/stop() around one asyncio task."""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)


class Service:
    """Runs `run_once()` every `interval` seconds (or sooner when `wakeup()` is called)."""

    name = "service"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopped = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop on the running event loop."""
        self._stopped = False
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def wakeup(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loop, then run `on_stop()` once (a final flush, say)."""
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.on_stop()

    async def _run(self) -> None:
        while not self._stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            if self._stopped:
                break
            try:
                await self.run_once()
            except Exception:
                log.exception("%s failed", self.name)

    async def run_once(self) -> None:
        """One round of work."""

    async def on_stop(self) -> None:
        """Work left to do after the loop ended."""
