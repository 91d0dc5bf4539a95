"""Fixtures: a name server and a broker serving from a background thread with its own loop.

CliRunner runs a command synchronously on the test's thread, and each command runs its own
event loop; the servers therefore live on another thread's loop, started and stopped here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.broker.controller import BrokerController
from engine.client.namesrv import NamesrvAdmin
from engine.namesrv.controller import NamesrvController
from tests.broker.conftest import broker_configs
from tests.client.conftest import create_topic
from tests.conftest import addr_of, namesrv_config

T = TypeVar("T")


class BackgroundCluster:
    """One name server and broker-a (DefaultCluster) on a private event loop thread."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-loop",
                                       daemon=True)
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None

    @property
    def ns(self) -> str:
        assert self.namesrv is not None
        return addr_of(self.namesrv)

    @property
    def broker_addr(self) -> str:
        assert self.broker is not None
        return self.broker.addr

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run `coro` on the cluster's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()
        self.call(self._start())

    async def _start(self) -> None:
        self.namesrv = NamesrvController(namesrv_config(self.root / "ns"))
        await self.namesrv.start()
        config, store = broker_configs(self.root, self.ns)
        self.broker = BrokerController(config, store)
        await self.broker.start()

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    async def _stop(self) -> None:
        if self.broker is not None:
            await self.broker.stop()
        if self.namesrv is not None:
            await self.namesrv.stop()

    def create_topic(self, topic: str, *, queues: int = 4) -> None:
        assert self.broker is not None
        self.call(create_topic(self.broker, topic, queues=queues))

    def admin_call(self, work: Any) -> Any:
        """Run ``work(admin)`` with a `NamesrvAdmin` over this name server (checks state)."""
        async def run() -> Any:
            async with NamesrvAdmin(self.ns) as admin:
                return await work(admin)
        return self.call(run())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = BackgroundCluster(tmp_path)
    running.start()
    try:
        yield running
    finally:
        running.stop()
