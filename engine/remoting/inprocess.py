"""In-process remoting: a client's connection to a server of the same process, without a socket.

How this works: `connect_pair` makes two `Connection`s joined by a `_Pipe` transport each
instead of a socket.  The client end's requests are not encoded: the `RemotingCommand`s it
writes in one turn of the event loop are handed together, at the loop's next turn, to the
server's own `RequestDispatcher` (as one socket read would be, so a run of sends still shares
one store append), with the access guard and any timing the dispatcher does.  The server end
is an ordinary `Connection` of the server (its answers, often already encoded by the
handlers, and any request the server makes of the client, go through the pipe to the client
end's `data_received`, which resolves the pending calls as for a socket).  Closing either
end closes both, at the loop's next turn, as a socket would report it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from engine.protocol.command import RemotingCommand, encode
from engine.remoting.connection import Connection, Dispatcher

OnClose = Callable[[Connection], None]


class _Pipe(asyncio.Transport):
    """One end's transport: what it writes is read by the other end, at once."""

    def __init__(self, sockname: tuple[str, int], peername: tuple[str, int]) -> None:
        super().__init__()
        self.peer: Connection | None = None
        self.ends: tuple[Connection, Connection] | None = None
        self._closing = False
        self._extra = {"sockname": sockname, "peername": peername}

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing and self.peer is not None:
            self.peer.data_received(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing or self.ends is None:
            return
        for end in self.ends:
            pipe = end._transport
            if isinstance(pipe, _Pipe):
                pipe._closing = True
        asyncio.get_running_loop().call_soon(_lost, self.ends)

    def abort(self) -> None:
        self.close()

    def pause_reading(self) -> None:
        pass  # the other end writes only when it is called: nothing piles up unread

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _lost(ends: tuple[Connection, Connection]) -> None:
    for end in ends:
        end.connection_lost(None)


class InProcessConnection(Connection):
    """The client end: requests go, not encoded, to the server's dispatcher."""

    def __init__(self, server_dispatcher: Dispatcher, *, dispatcher: Dispatcher | None = None,
                 on_close: OnClose | None = None) -> None:
        super().__init__(dispatcher, on_close=on_close)
        self._server_dispatcher = server_dispatcher
        self.server_end: Connection | None = None
        self._requests: list[RemotingCommand] = []

    def write(self, cmd: RemotingCommand) -> None:
        """Queue a request (or an answer to one the server made) for the loop's next turn."""
        if cmd.is_response:  # answers to the server's own requests travel as bytes
            self.write_bytes(encode(cmd))
            return
        if self.closed:
            super().write(cmd)  # raises RemotingSendError, as for a closed socket
        loop = self._loop
        assert loop is not None
        requests = self._requests
        if not requests:
            loop.call_soon(self._deliver)
        requests.append(cmd)
        self.last_activity = loop.time()

    def _deliver(self) -> None:
        requests, self._requests = self._requests, []
        server_end = self.server_end
        if not requests or server_end is None or server_end.closed:
            return
        assert server_end._loop is not None
        server_end.last_activity = server_end._loop.time()
        self._server_dispatcher(server_end, requests)


def connect_pair(server_dispatcher: Dispatcher, *, server_on_close: OnClose | None = None,
                 client_dispatcher: Dispatcher | None = None,
                 client_on_close: OnClose | None = None,
                 client_addr: tuple[str, int] = ("127.0.0.1", 0),
                 server_addr: tuple[str, int] = ("127.0.0.1", 0), trusted: bool = False,
                 ) -> tuple[InProcessConnection, Connection]:
    """A connected (client end, server end) pair; call from the event loop's thread.

    `server_dispatcher` handles the client end's requests on the server end (the server's
    `RequestDispatcher`); `client_dispatcher` the requests the server sends the client.
    `trusted` marks the server end as the server's own (`Connection.trusted`).
    """
    client = InProcessConnection(server_dispatcher, dispatcher=client_dispatcher,
                                 on_close=client_on_close)
    server = Connection(server_dispatcher, on_close=server_on_close)
    server.trusted = trusted
    client_pipe, server_pipe = _Pipe(client_addr, server_addr), _Pipe(server_addr, client_addr)
    client_pipe.peer, server_pipe.peer = server, client
    client_pipe.ends = server_pipe.ends = (client, server)
    client.connection_made(client_pipe)
    server.connection_made(server_pipe)
    client.server_end = server
    return client, server
