"""ServerConnection under a real HTTP/2 client: h2load (nghttp2) sends 100 requests with
bodies, 10 at a time, to a tiny asyncio server that answers each with `send_unary`."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from engine.proxy.h2.connection import ServerConnection
from engine.proxy.h2.events import ConnectionEnded, DataReceived, RequestReceived
from engine.proxy.h2.frames import encode_headers

HEAD = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS = encode_headers([("grpc-status", "0"), ("grpc-message", "")])


class _Server(asyncio.Protocol):
    """Answers every request with its body's length, once the request ends."""

    def __init__(self) -> None:
        self.conn = ServerConnection()
        self.sizes: dict[int, int] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.conn.receive(data):
            if isinstance(event, RequestReceived):
                self.sizes[event.stream_id] = 0
                assert event.end_stream is False
            elif isinstance(event, DataReceived):
                self.sizes[event.stream_id] += len(event.data)
                if event.end_stream:
                    size = self.sizes.pop(event.stream_id)
                    message = b"\x00" + size.to_bytes(4, "big") + b"r" * size
                    self.conn.send_unary(event.stream_id, HEAD, message, TRAILERS)
            elif isinstance(event, ConnectionEnded) and not event.by_peer:
                self.transport.write(self.conn.data_to_send())
                self.transport.close()
                return
        self.transport.write(self.conn.data_to_send())


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (nghttp2) not installed")
async def test_h2load_gets_every_answer(tmp_path: Path) -> None:
    body = tmp_path / "body.bin"
    body.write_bytes(b"\x00\x00\x00\x04\x00" + b"q" * 1024)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Server, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            "h2load", "-n", "100", "-c", "1", "-m", "10", "-d", str(body),
            "-H", "content-type: application/grpc", f"http://127.0.0.1:{port}/x",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(process.communicate(), 60)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    finally:
        server.close()
        await server.wait_closed()
    text = out.decode()
    assert re.search(r"100 total, \d+ started, 100 done, 100 succeeded, 0 failed", text), text
    assert "status codes: 100 2xx" in text, text
