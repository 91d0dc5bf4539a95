"""The remoting server: accepts connections and dispatches their requests through a router."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from engine.protocol.frame import DEFAULT_MAX_FRAME
from engine.remoting.connection import CLOSE_GRACE_S, Connection, Dispatcher
from engine.remoting.dispatch import Guard, RequestDispatcher
from engine.remoting.errors import RemotingError
from engine.remoting.inprocess import connect_pair
from engine.remoting.router import Router

log = logging.getLogger(__name__)

S = TypeVar("S")


class PortInUseError(RemotingError):
    """The listen address is taken by another process."""


class RemotingServer(Generic[S]):
    """Listens on one address; connections idle longer than `idle_timeout` seconds are closed.

    A closed connection has `close_grace` seconds to send the answers it holds; then it is
    aborted (a peer that reads none would keep it, and its file descriptor, for ever).
    """

    def __init__(
        self,
        router: Router,
        state: S,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_connection_closed: Callable[[Connection], None] | None = None,
        idle_timeout: float | None = 120.0,
        close_grace: float = CLOSE_GRACE_S,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = port
        self.max_frame = max_frame
        self.idle_timeout = idle_timeout
        self.close_grace = close_grace
        self.connections: set[Connection] = set()
        self._dispatcher = RequestDispatcher(router, state)
        self._on_connection_closed = on_connection_closed
        self._server: asyncio.Server | None = None
        self._idle_task: asyncio.Task[None] | None = None

    def set_guard(self, guard: Guard | None) -> None:
        """Check every request with `guard` before its handler (access control), or stop."""
        self._dispatcher.guard = guard

    @property
    def dispatcher(self) -> RequestDispatcher[S]:
        return self._dispatcher

    def set_dispatcher(self, dispatcher: RequestDispatcher[S]) -> None:
        """Dispatch requests through `dispatcher` (e.g. one that times them); before `start`.

        Connections keep the dispatcher they were made with; the access guard carries over.
        """
        dispatcher.guard = self._dispatcher.guard
        self._dispatcher = dispatcher

    def connect_in_process(self, *, client_dispatcher: Dispatcher | None = None,
                           client_on_close: Callable[[Connection], None] | None = None,
                           client_addr: tuple[str, int] = ("127.0.0.1", 0),
                           trusted: bool = False) -> Connection:
        """A connection to this server from this process, without a socket (`inprocess`):
        its requests go to this server's dispatcher as if read from a connection of
        `client_addr`, the access guard included unless `trusted` (the server's own
        requests, as the local proxy's).  Call it from the event loop, once started."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        client, server_end = connect_pair(
            self._dispatcher, server_on_close=self._closed, client_dispatcher=client_dispatcher,
            client_on_close=client_on_close, client_addr=client_addr,
            server_addr=(host, self.port), trusted=trusted)
        self.connections.add(server_end)
        return client

    def _make_connection(self) -> Connection:
        conn = Connection(self._dispatcher, max_frame=self.max_frame, on_close=self._closed)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self._dispatcher.forget(conn)
        if self._on_connection_closed is not None:
            self._on_connection_closed(conn)

    async def start(self) -> None:
        """Bind and listen.

        Raises:
            PortInUseError: the address is already in use.
        """
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._make_connection, self.host, self.requested_port, reuse_address=True
            )
        except OSError as exc:
            if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
                raise PortInUseError(
                    f"port {self.requested_port} on {self.host} is already in use"
                ) from None
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        if self.idle_timeout:
            self._idle_task = asyncio.create_task(self._close_idle(self.idle_timeout))
        log.info("listening on %s:%d", self.host, self.port)

    async def _close_idle(self, idle_timeout: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(10.0, idle_timeout))
            deadline = loop.time() - idle_timeout
            for conn in list(self.connections):
                if conn.last_activity < deadline:
                    if not conn.closed:
                        log.info("closing connection from %s: idle for %.0f s",
                                 conn.remote_addr, idle_timeout)
                    conn.close(self.close_grace)  # aborted after the grace if still unread

    async def stop(self) -> None:
        """Stop listening, close every connection and cancel running handlers."""
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
            self._idle_task = None
        if self._server is not None:
            self._server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.close(self.close_grace)  # aborted after the grace if its peer reads nothing
        await self._dispatcher.cancel_all()
        await asyncio.gather(*(conn.wait_closed() for conn in conns))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
