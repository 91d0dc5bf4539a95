"""Lag alerts: JSON events POSTed to webhooks (httpx), retried with backoff, never blocking.

How this works: `Webhooks.submit` queues an event and returns at once; one worker task
POSTs each event to every URL, retrying a failed delivery (connection error, timeout, 5xx
or 429) up to `retries` times with exponential backoff.  A webhook that stays dead only
costs log lines: sampling never waits on it.  At stop the queue is drained for a few
seconds, then what is left is logged as undelivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # httpx is imported when a webhook is first used: not at start-up
    import httpx

log = logging.getLogger("mqadmin.lag")

RETRIES = 4
BACKOFF = 0.5  # seconds, doubled after each failed attempt
TIMEOUT = 5.0
QUEUE_LIMIT = 1000
DRAIN_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Delivery:
    url: str
    ok: bool
    attempts: int
    detail: str


class Webhooks:
    """Posts events to `urls` in the background."""

    def __init__(self, urls: Sequence[str], *, retries: int = RETRIES, backoff: float = BACKOFF,
                 timeout: float = TIMEOUT) -> None:
        self.urls = tuple(urls)
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.delivered = 0
        self.failed = 0
        self._queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if not self.urls or self._task is not None:
            return
        import httpx

        self._client = httpx.AsyncClient(timeout=self.timeout)
        self._task = asyncio.get_running_loop().create_task(self._work(), name="webhooks")

    def submit(self, event: Mapping[str, Any]) -> None:
        """Queue `event` for every webhook (dropped, with a warning, past QUEUE_LIMIT)."""
        if not self.urls:
            return
        if self._queue.qsize() >= QUEUE_LIMIT:
            log.warning("webhook queue full (%d events): dropping %s", QUEUE_LIMIT,
                        event.get("event"))
            return
        self._queue.put_nowait(event)

    async def post(self, event: Mapping[str, Any]) -> list[Delivery]:
        """POST `event` to every URL now, with retries; one `Delivery` per URL."""
        import httpx

        client = self._client or httpx.AsyncClient(timeout=self.timeout)
        try:
            return list(await asyncio.gather(*(self._deliver(client, u, event)
                                               for u in self.urls)))
        finally:
            if client is not self._client:
                await client.aclose()

    async def _deliver(self, client: httpx.AsyncClient, url: str,
                       event: Mapping[str, Any]) -> Delivery:
        import httpx

        delay = self.backoff
        detail = ""
        for attempt in range(1, self.retries + 2):
            try:
                resp = await client.post(url, json=dict(event))
                if resp.status_code < 400:
                    self.delivered += 1
                    return Delivery(url, True, attempt, str(resp.status_code))
                detail = f"HTTP {resp.status_code}"
                if resp.status_code < 500 and resp.status_code != 429:
                    break  # the receiver refuses this event: retrying will not help
            except httpx.HTTPError as exc:
                detail = f"{type(exc).__name__}: {exc}"
            if attempt <= self.retries:
                await asyncio.sleep(delay)
                delay *= 2
        self.failed += 1
        log.warning("webhook %s: %s not delivered (%s)", url, event.get("event"), detail)
        return Delivery(url, False, attempt, detail)

    async def _work(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self.post(event)
            finally:
                self._queue.task_done()

    async def stop(self, drain: float = DRAIN_SECONDS) -> None:
        """Deliver what is queued (for up to `drain` seconds), then close."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), drain)
        if self._queue.qsize():
            log.warning("%d webhook event(s) not delivered at stop", self._queue.qsize())
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
