"""A client keeping one reused connection per address, with a timeout on every call.

An address may be served by a server of this process (`reach_in_process`): its connections
are then made by that server, without a socket (`engine.remoting.inprocess`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from engine.protocol.command import RemotingCommand
from engine.protocol.frame import DEFAULT_MAX_FRAME
from engine.protocol.signature import Credentials, sign
from engine.remoting.address import parse_addr
from engine.remoting.connection import Connection, Dispatcher
from engine.remoting.dispatch import RequestDispatcher
from engine.remoting.errors import RemotingClosedError, RemotingConnectError, RemotingError
from engine.remoting.router import Router

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 3.0

#: Makes a connection to a server of this process: (client's dispatcher, on close) -> it.
InProcessConnector = Callable[[Dispatcher | None, Callable[[Connection], None]], Connection]


class RemotingClient:
    """Calls peers by address; requests the peers send back go to an optional router."""

    def __init__(
        self,
        router: Router | None = None,
        state: Any = None,
        *,
        connect_timeout: float = 3.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        credentials: Credentials | None = None,
    ) -> None:
        #: When set, every request this client sends is signed (AccessKey + Signature).
        self.credentials = credentials
        self._dispatcher = RequestDispatcher(router, state) if router is not None else None
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        self._in_process: dict[str, InProcessConnector] = {}

    def reach_in_process(self, addr: str, connector: InProcessConnector) -> None:
        """Reach `addr` through connections `connector` makes (a server of this process)."""
        self._in_process[addr] = connector
        self.close_connection(addr)

    async def connection(self, addr: str) -> Connection:
        """The open connection to `addr`, connecting first when there is none.

        Raises:
            RemotingConnectError: the address is invalid or does not accept connections.
        """
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingClosedError("client is closed", addr)
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            conn = await self._connect(addr)
            self._conns[addr] = conn
            return conn

    async def _connect(self, addr: str) -> Connection:
        connector = self._in_process.get(addr)
        if connector is not None:
            conn = connector(self._dispatcher, self._forget)
            conn.remote_addr = addr
            return conn
        try:
            host, port = parse_addr(addr)
        except ValueError as exc:
            raise RemotingConnectError(str(exc), addr) from None
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return Connection(self._dispatcher, max_frame=self.max_frame, on_close=self._forget)

        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(factory, host, port), self.connect_timeout
            )
        except TimeoutError:
            raise RemotingConnectError(
                f"connect to {addr} timed out after {self.connect_timeout:g} s", addr
            ) from None
        except OSError as exc:
            raise RemotingConnectError(
                f"cannot connect to {addr}: {exc.strerror or exc}", addr
            ) from None
        conn.remote_addr = addr
        return conn

    def _forget(self, conn: Connection) -> None:
        if self._conns.get(conn.remote_addr) is conn:
            del self._conns[conn.remote_addr]
        if self._dispatcher is not None:
            self._dispatcher.forget(conn)

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> RemotingCommand:
        """Send `cmd` to `addr` and return the response (see `Connection.invoke`)."""
        if self.credentials is not None:
            cmd = sign(cmd, self.credentials)
        conn = await self.connection(addr)
        return await conn.invoke(cmd, timeout)

    async def invoke_many(self, addr: str, cmds: Sequence[RemotingCommand],
                          timeout: float = DEFAULT_TIMEOUT
                          ) -> list[RemotingCommand | RemotingError]:
        """Send `cmds` to `addr` at once; the answer to each, or the error it failed with
        (see `Connection.invoke_many`)."""
        if self.credentials is not None:
            credentials = self.credentials
            cmds = [sign(cmd, credentials) for cmd in cmds]
        conn = await self.connection(addr)
        return await conn.invoke_many(cmds, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        if self.credentials is not None:
            cmd = sign(cmd, self.credentials)
        conn = await self.connection(addr)
        conn.send_oneway(cmd)

    def close_connection(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        """Close every connection; pending calls fail with `RemotingClosedError`."""
        self._closed = True
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            await conn.wait_closed()
        if self._dispatcher is not None:
            await self._dispatcher.cancel_all()
