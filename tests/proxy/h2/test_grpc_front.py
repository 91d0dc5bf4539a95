"""`GrpcFront` (our HTTP/2 gRPC front) with grpcio's client: statuses and their texts,
metadata and peer, deadlines and cancellation, streams both ways, compression, large
answers through flow control, TLS by the mode, and a graceful stop.

The front serves test methods here (the service's own are tested through the whole proxy
suite, `PROXY_FRONT=h2`), so each behaviour has a method that shows it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from hpack import Decoder, Encoder

from engine.proxy.h2.grpc_server import GrpcFront
from engine.proxy.handlers import SERVICE, Method
from engine.proxy.tls import self_signed
from tests.proxy.h2frames import (
    ACK,
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    PING,
    frame,
    start,
)

MAX_MESSAGE = 4 * 1024 * 1024
TIMEOUT = 10.0


def _unary(name: str, handler: Callable[..., Any]) -> Method:
    return Method(name, handler, bytes, bytes, False, False)


def _streams(name: str, handler: Callable[..., Any], *, client: bool) -> Method:
    return Method(name, handler, bytes, bytes, client, True)


class Methods:
    """The test methods, and what they saw."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.seen: list[Any] = []

    async def echo(self, request: bytes, context: Any) -> bytes:
        metadata = dict(context.invocation_metadata())
        self.seen.append((metadata, context.peer(), context.time_remaining()))
        return request

    async def fail(self, request: bytes, context: Any) -> bytes:
        raise RuntimeError("a bug")

    async def abort(self, request: bytes, context: Any) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, request.decode())
        raise AssertionError("abort returned")

    async def swallowed_abort(self, request: bytes, context: Any) -> bytes:
        with contextlib.suppress(Exception):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
        return b"not this"

    async def block(self, request: bytes, context: Any) -> bytes:
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return b"released"

    async def large(self, request: bytes, context: Any) -> bytes:
        return bytes(range(256)) * (int(request) // 256)

    async def count(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        for n in range(int(request)):
            yield str(n).encode()
        if request == b"3":
            await context.abort(grpc.StatusCode.ABORTED, "after three")

    async def chat(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request.upper()

    def table(self) -> dict[str, Method]:
        return {
            "Echo": _unary("Echo", self.echo), "Fail": _unary("Fail", self.fail),
            "Abort": _unary("Abort", self.abort),
            "Swallowed": _unary("Swallowed", self.swallowed_abort),
            "Block": _unary("Block", self.block), "Large": _unary("Large", self.large),
            "Count": _streams("Count", self.count, client=False),
            "Chat": _streams("Chat", self.chat, client=True),
        }


@contextlib.asynccontextmanager
async def serving(methods: Methods, *, tls: ssl.SSLContext | None = None, permissive: bool = False,
                  max_message: int = MAX_MESSAGE) -> AsyncIterator[tuple[GrpcFront, str]]:
    front = GrpcFront(methods.table(), max_message_size=max_message)
    listener = socket.create_server(("127.0.0.1", 0))
    await front.serve(listener, tls, permissive=permissive)
    try:
        yield front, f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        await front.stop(0)
        listener.close()



def call(channel: grpc.aio.Channel, name: str) -> Any:
    return channel.unary_unary(f"/{SERVICE}/{name}")


async def status_of(awaitable: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await awaitable
    return info.value.code(), info.value.details() or ""


async def test_a_unary_call_sees_its_metadata_peer_and_deadline() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        answer = await call(ch, "Echo")(b"hello", timeout=TIMEOUT,
                                        metadata=(("x-mq-client-id", "c1"),
                                                  ("trace-bin", b"\x00\xff")))
        assert answer == b"hello"
        ((metadata, peer, remaining),) = methods.seen
        assert metadata["x-mq-client-id"] == "c1" and metadata["trace-bin"] == b"\x00\xff"
        assert "grpc-timeout" not in metadata and "content-type" not in metadata
        assert peer.startswith("ipv4:127.0.0.1:")
        assert remaining is not None and 0 < remaining <= TIMEOUT


async def test_statuses_and_their_texts() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        assert await status_of(call(ch, "Fail")(b"", timeout=TIMEOUT)) == (
            grpc.StatusCode.UNKNOWN, "Application error processing RPC")
        text = "über 100% sure\nnot found"
        assert await status_of(call(ch, "Abort")(text.encode(), timeout=TIMEOUT)) == (
            grpc.StatusCode.NOT_FOUND, text)
        assert await status_of(call(ch, "Swallowed")(b"", timeout=TIMEOUT)) == (
            grpc.StatusCode.PERMISSION_DENIED, "no")
        assert await status_of(call(ch, "Nope")(b"", timeout=TIMEOUT)) == (
            grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {SERVICE}/Nope")


async def test_a_deadline_cancels_the_method() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        code, _ = await status_of(call(ch, "Block")(b"", timeout=0.5))
        assert code is grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.wait_for(methods.cancelled.wait(), TIMEOUT)


async def test_a_client_that_cancels_cancels_the_method() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        pending = call(ch, "Block")(b"", timeout=TIMEOUT)
        task = asyncio.ensure_future(pending)
        await asyncio.wait_for(methods.entered.wait(), TIMEOUT)
        task.cancel()
        await asyncio.wait_for(methods.cancelled.wait(), TIMEOUT)
        # The connection serves on.
        assert await call(ch, "Echo")(b"after", timeout=TIMEOUT) == b"after"


async def test_server_streams_end_with_their_status() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        count = ch.unary_stream(f"/{SERVICE}/Count")
        assert [m async for m in count(b"5", timeout=TIMEOUT)] == [b"0", b"1", b"2", b"3",
                                                                   b"4"]
        stream = count(b"3", timeout=TIMEOUT)
        got = []
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for message in stream:
                got.append(message)
        assert got == [b"0", b"1", b"2"]
        assert (info.value.code(), info.value.details()) == (grpc.StatusCode.ABORTED,
                                                              "after three")
        assert [m async for m in count(b"0", timeout=TIMEOUT)] == []


async def test_a_bidirectional_stream_answers_each_request_and_ends_with_the_client() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        chat = ch.stream_stream(f"/{SERVICE}/Chat")(timeout=TIMEOUT)
        for word in (b"one", b"two"):
            await chat.write(word)
            assert await chat.read() == word.upper()
        await chat.done_writing()
        assert await chat.read() is grpc.aio.EOF
        assert await chat.code() is grpc.StatusCode.OK


async def test_large_answers_flow_through_the_windows_and_many_calls_share_a_connection() -> None:
    methods = Methods()
    async with serving(methods) as (_, endpoint), grpc.aio.insecure_channel(endpoint) as ch:
        big = await call(ch, "Large")(str(3 * 1024 * 1024).encode(), timeout=TIMEOUT)
        assert big == bytes(range(256)) * (3 * 1024 * 1024 // 256)
        answers = await asyncio.gather(*(call(ch, "Echo")(str(n).encode(), timeout=TIMEOUT)
                                         for n in range(1000)))
        assert answers == [str(n).encode() for n in range(1000)]


async def test_compressed_requests_are_read_and_oversized_ones_refused() -> None:
    methods = Methods()
    async with serving(methods, max_message=1000) as (_, endpoint), \
            grpc.aio.insecure_channel(endpoint) as ch:
        body = b"x" * 900
        assert await call(ch, "Echo")(body, timeout=TIMEOUT,
                                      compression=grpc.Compression.Gzip) == body
        code, details = await status_of(call(ch, "Echo")(b"x" * 2000, timeout=TIMEOUT))
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "1000" in details


async def test_tls_enforcing_and_permissive() -> None:
    material = self_signed(["127.0.0.1"])
    credentials = grpc.ssl_channel_credentials(root_certificates=material.certificate)
    for permissive in (False, True):
        methods = Methods()
        async with serving(methods, tls=material.ssl_context(), permissive=permissive) as (
                _, endpoint):
            async with grpc.aio.secure_channel(endpoint, credentials) as ch:
                assert await call(ch, "Echo")(b"secret", timeout=TIMEOUT) == b"secret"
            async with grpc.aio.insecure_channel(endpoint) as ch:
                if permissive:
                    assert await call(ch, "Echo")(b"plain", timeout=TIMEOUT) == b"plain"
                else:
                    code, _ = await status_of(call(ch, "Echo")(b"plain", timeout=TIMEOUT))
                    assert code is grpc.StatusCode.UNAVAILABLE


async def test_a_graceful_stop_lets_calls_in_flight_finish_and_refuses_new_ones() -> None:
    methods = Methods()
    front = GrpcFront(methods.table(), max_message_size=MAX_MESSAGE)
    listener = socket.create_server(("127.0.0.1", 0))
    await front.serve(listener, None, permissive=False)
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        async with grpc.aio.insecure_channel(endpoint) as ch:
            in_flight = asyncio.ensure_future(call(ch, "Block")(b"", timeout=TIMEOUT))
            await asyncio.wait_for(methods.entered.wait(), TIMEOUT)
            stopping = asyncio.ensure_future(front.stop(TIMEOUT))
            while not front.stopping:
                await asyncio.sleep(0)
            code, _ = await status_of(call(ch, "Echo")(b"late", timeout=TIMEOUT))
            assert code is grpc.StatusCode.UNAVAILABLE
            methods.release.set()
            assert await in_flight == b"released"
            await asyncio.wait_for(stopping, TIMEOUT)
    finally:
        listener.close()


async def _answer(endpoint: str, fields: list[tuple[str, str]]) -> tuple[dict[str, str],
                                                                          bytes]:
    """Send one request's HEADERS (END_STREAM) as given; the answer's header fields and
    body."""
    host, port = endpoint.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(start() + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                     Encoder().encode(fields)))
        decoder, answer, body = Decoder(), {}, b""
        while True:
            head = await asyncio.wait_for(reader.readexactly(9), TIMEOUT)
            payload = await reader.readexactly(int.from_bytes(head[:3], "big"))
            if int.from_bytes(head[5:9], "big") != 1:
                continue
            if head[3] == HEADERS:
                answer.update((str(k), str(v)) for k, v in decoder.decode(payload))
            elif head[3] == DATA:
                body += payload
            if head[4] & END_STREAM:
                return answer, body
    finally:
        writer.close()


async def test_requests_that_are_not_grpc_are_answered_as_grpc_java_answers_them() -> None:
    request = [(":method", "POST"), (":scheme", "http"), (":authority", "proxy"),
               (":path", f"/{SERVICE}/Echo"), ("content-type", "application/grpc")]
    async with serving(Methods()) as (_, endpoint):
        cases = [
            ([(":method", "GET"), *request[1:]], "405", "Method 'GET' is not supported"),
            ([*request[:4], ("content-type", "text/plain")], "415",
             "Content-Type 'text/plain' is not supported"),
            (request[:4], "415", "Content-Type is missing from the request"),
        ]
        for fields, http_status, message in cases:
            answer, body = await _answer(endpoint, fields)
            assert (answer[":status"], answer["grpc-status"], answer["grpc-message"]) == (
                http_status, "13", message)
            assert body == message.encode()
        answer, body = await _answer(endpoint, [*request, ("trace-bin", "@@@")])
        assert (answer[":status"], answer["grpc-status"], answer["grpc-message"], body) == (
            "200", "13", "Invalid base64 in binary header trace-bin", b"")


async def _silent_then_read(front: GrpcFront, endpoint: str, *, answer_pings: int,
                            keepalive_timeout: float) -> tuple[int, bool]:
    """A client that opens a Block call and then sends nothing but the ACKs of the first
    `answer_pings` PINGs: how many PINGs it got (`answer_pings` + 1), and whether the front
    had closed the connection after the last (`answer_pings` is 0) or it was still open
    (then the client leaves)."""
    front.keepalive_time, front.keepalive_timeout = 0.1, keepalive_timeout
    host, port = endpoint.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    fields = [(":method", "POST"), (":scheme", "http"), (":authority", "proxy"),
              (":path", f"/{SERVICE}/Block"), ("content-type", "application/grpc")]
    writer.write(start() + frame(HEADERS, END_HEADERS, 1, Encoder().encode(fields))
                 + frame(DATA, END_STREAM, 1, b"\x00\x00\x00\x00\x00"))
    pings = 0
    try:
        while pings <= answer_pings:
            head = await asyncio.wait_for(reader.readexactly(9), TIMEOUT)
            payload = await reader.readexactly(int.from_bytes(head[:3], "big"))
            if head[3] == PING and not head[4] & ACK:
                pings += 1
                if pings <= answer_pings:
                    writer.write(frame(PING, ACK, 0, payload))
        if answer_pings:
            return pings, bool(front.connections)
        return pings, await asyncio.wait_for(reader.read(), TIMEOUT) == b""
    except ConnectionResetError:
        return pings, True
    finally:
        writer.close()


async def test_a_peer_that_answers_pings_keeps_its_connection_and_its_call() -> None:
    methods = Methods()
    async with serving(methods) as (front, endpoint):
        pings, open_ = await _silent_then_read(front, endpoint, answer_pings=3,
                                               keepalive_timeout=TIMEOUT)
        assert pings == 4 and open_ and not methods.cancelled.is_set()


async def test_a_dead_peer_is_closed_and_its_calls_end() -> None:
    methods = Methods()
    async with serving(methods) as (front, endpoint):
        pings, closed = await _silent_then_read(front, endpoint, answer_pings=0,
                                                keepalive_timeout=0.3)
        assert pings == 1 and closed
        await asyncio.wait_for(methods.cancelled.wait(), TIMEOUT)
        assert not front.connections
