"""A tiny asyncio HTTP/2 server on `ServerConnection` for tests with real clients: every
request's body (its gRPC messages, as sent) comes back as the response with grpc-status 0."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from engine.proxy.h2.connection import ServerConnection
from engine.proxy.h2.events import ConnectionEnded, DataReceived, RequestReceived
from engine.proxy.h2.frames import encode_headers

HEAD = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS = encode_headers([("grpc-status", "0"), ("grpc-message", "")])


class EchoProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.conn = ServerConnection()
        self.bodies: dict[int, list[bytes]] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.conn.initiate()
        self.transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.conn.receive(data):
            if isinstance(event, RequestReceived):
                self.bodies[event.stream_id] = []
                if event.end_stream:
                    self._answer(event.stream_id)
            elif isinstance(event, DataReceived):
                self.bodies[event.stream_id].append(event.data)
                if event.end_stream:
                    self._answer(event.stream_id)
            elif isinstance(event, ConnectionEnded) and not event.by_peer:
                self.transport.write(self.conn.data_to_send())
                self.transport.close()
                return
        self.transport.write(self.conn.data_to_send())

    def _answer(self, stream_id: int) -> None:
        body = b"".join(self.bodies.pop(stream_id))
        self.conn.send_unary(stream_id, HEAD, body, TRAILERS)


@asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    """An echo server on 127.0.0.1 and a port from the OS; yields the port."""
    server = await asyncio.get_running_loop().create_server(EchoProtocol, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
