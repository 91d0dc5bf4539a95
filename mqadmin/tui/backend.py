"""The dashboard's network side: one thread with its own event loop and one `MQAdmin`.

How this works: the Textual app never talks to a cluster on its own loop.  Screens' workers
hand a coroutine function ``work(admin)`` to `Backend.call`, which runs it on the backend
loop (a daemon thread started with the app) over one long-lived `MQAdmin` (signing with the
endpoint's credentials when access control is on), and await the
result through `asyncio.wrap_future`.  The UI loop thus only waits; decoding a thousand
topic configs never delays a key press by more than a GIL switch.  `switch` points the
admin at other name servers (``:context NAME``); `close` closes the connections and stops
the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from engine.client.admin.cluster import MQAdmin
from mqadmin.config import Endpoint

T = TypeVar("T")

#: Seconds to connect and to wait for each answer: an unreachable server shows quickly.
TIMEOUT = 3.0

Work = Callable[[MQAdmin], Awaitable[T]]


class Backend:
    """Runs operations on a private event loop thread, over the endpoint's name servers."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = TIMEOUT) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="dashboard-backend", daemon=True)
        self._admin: MQAdmin | None = None
        self._thread.start()

    def _submit(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _admin_now(self) -> MQAdmin:
        if self._admin is None:
            self._admin = MQAdmin(self.endpoint.addrs, timeout=self.timeout,
                                  credentials=self.endpoint.credentials)
        return self._admin

    async def _run(self, work: Work[T]) -> T:
        return await work(await self._admin_now())

    async def call(self, work: Work[T]) -> T:
        """`work(admin)` run on the backend loop; awaited from any other loop."""
        return await asyncio.wrap_future(self._submit(self._run(work)))

    def call_sync(self, fn: Callable[[], Awaitable[T]], timeout: float) -> T:
        """`fn()` run on the backend loop, waited for from another thread (not the UI loop
        while it must stay responsive: at exit, say)."""
        result: T = self._submit(fn()).result(timeout)
        return result

    async def blocking(self, fn: Callable[[], T]) -> T:
        """`fn()` (file or SQLite work) on a thread of its own, awaited from the UI loop."""
        return await asyncio.to_thread(fn)

    async def _switch(self, endpoint: Endpoint) -> None:
        old, self._admin = self._admin, None
        self.endpoint = endpoint
        if old is not None:
            await old.close()

    async def switch(self, endpoint: Endpoint) -> None:
        """Talk to `endpoint`'s name servers from now on (connections are re-opened)."""
        await asyncio.wrap_future(self._submit(self._switch(endpoint)))

    async def _close(self) -> None:
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    def close(self) -> None:
        """Close the connections and stop the thread (from any thread but the backend's)."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):  # best effort: the process is ending anyway
            self._submit(self._close()).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
