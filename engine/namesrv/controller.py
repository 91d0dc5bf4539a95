"""`NamesrvController`: the name server's state, its remoting server and its expiry scan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from engine.namesrv.access import NamesrvGuard
from engine.namesrv.config import NamesrvConfig
from engine.namesrv.handlers import build_router
from engine.namesrv.routes import Clock, wall_clock_ms
from engine.namesrv.state import NamesrvState
from engine.remoting.connection import Connection
from engine.remoting.server import RemotingServer

log = logging.getLogger("engine.namesrv")


class ExpiryScanService:
    """Every `scanNotActiveBrokerInterval` ms, drops brokers silent for 120 s and closes
    their connections (4.9.7 `scanNotActiveBroker`)."""

    def __init__(self, state: NamesrvState) -> None:
        self.state = state
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="namesrv-expiry-scan")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(self.state.config.scan_not_active_broker_interval, 100)
                                / 1000)
            try:
                self.scan_once()
            except Exception:  # the loop must survive a bug in one scan
                log.exception("scanNotActiveBroker failed")

    def scan_once(self) -> int:
        expired = self.state.routes.scan_not_active()
        for broker in expired:
            log.warning("The broker channel expired, %s %dms", broker.addr,
                        self.state.routes.expiry_ms)
            if isinstance(broker.conn_key, Connection):
                broker.conn_key.close()
        return len(expired)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class NamesrvController:
    """Wires a name server together; `start()` loads kvConfig.json and binds the port."""

    def __init__(self, config: NamesrvConfig, *, clock: Clock = wall_clock_ms,
                 extra_properties: dict[str, str] | None = None) -> None:
        self.state = NamesrvState(config, clock=clock, extra_properties=extra_properties)
        idle = config.server_channel_max_idle_time_seconds
        self.server: RemotingServer[NamesrvState] = RemotingServer(
            build_router(), self.state,
            host=config.bind_address, port=config.listen_port,
            on_connection_closed=self._on_connection_closed,
            idle_timeout=float(idle) if idle > 0 else None,
        )
        if config.authentication_enabled:  # AuthConfigError: refuse to start
            self.server.set_guard(NamesrvGuard(config))
        self.scanner = ExpiryScanService(self.state)
        #: Called after the routes forgot a closed connection's broker (tests await this).
        self.connection_closed_listeners: list[Callable[[Connection], None]] = []

    @property
    def port(self) -> int:
        return self.server.port

    def _on_connection_closed(self, conn: Connection) -> None:
        self.state.routes.on_connection_closed(conn.remote_addr, conn)
        for listener in self.connection_closed_listeners:
            listener(conn)

    async def start(self) -> None:
        """Load the KV table, listen, start the scan.

        Raises:
            KVConfigError: kvConfig.json is unreadable.
            PortInUseError: the listen port is taken.
        """
        self.state.kv.load()
        await self.server.start()
        self.scanner.start()
        log.info("name server listening on %s:%d", self.server.host, self.server.port)

    async def stop(self) -> None:
        """Stop scanning and serving, then write the KV table one last time."""
        await self.scanner.stop()
        await self.server.stop()
        await self.state.persist_kv()
        log.info("name server stopped")
