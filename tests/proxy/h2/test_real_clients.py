"""ServerConnection under real HTTP/2 clients: h2load (nghttp2) sends 100 requests with
bodies, 10 at a time; grpcio's client makes unary calls, small and larger than every
flow-control window, to a tiny echo server."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import grpc
import pytest

from tests.proxy.h2.echo import echo_server


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (nghttp2) not installed")
async def test_h2load_gets_every_answer(tmp_path: Path) -> None:
    body = tmp_path / "body.bin"
    body.write_bytes(b"\x00\x00\x00\x04\x00" + b"q" * 1024)
    async with echo_server() as port:
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
    text = out.decode()
    assert re.search(r"100 total, \d+ started, 100 done, 100 succeeded, 0 failed", text), text
    assert "status codes: 100 2xx" in text, text
    assert "traffic: " in text and re.search(r"\(\d+\) data", text), text


async def test_grpcio_unary_calls() -> None:
    sizes = [0, 1, 1000, 70_000, 3_000_000]  # the last two beyond 64 KiB windows
    async with echo_server() as port, grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        echo = channel.unary_unary("/test.Echo/Echo")
        for size in sizes:
            request = bytes(range(256)) * (size // 256) + b"e" * (size % 256)
            assert await echo(request, timeout=30) == request
        answers = await asyncio.gather(*(echo(b"m%d" % i, timeout=30) for i in range(200)))
        assert answers == [b"m%d" % i for i in range(200)]
