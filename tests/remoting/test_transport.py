"""The asyncio server and client over real loopback sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from engine.protocol.codes import ResponseCode, SerializeType
from engine.protocol.command import RemotingCommand, encode, request
from engine.protocol.errors import HeaderError
from engine.remoting.client import RemotingClient
from engine.remoting.connection import Connection
from engine.remoting.errors import (
    RemotingClosedError,
    RemotingConnectError,
    RemotingSendError,
    RemotingTimeoutError,
)
from engine.remoting.router import RequestContext, Router
from engine.remoting.server import PortInUseError, RemotingServer

ECHO, SLOW, BOOM, ONEWAY, HOLD, CALLBACK, BIG = 1001, 1002, 1003, 1004, 1005, 1006, 1007


@dataclass
class State:
    oneway_seen: asyncio.Queue[RemotingCommand] = field(default_factory=asyncio.Queue)
    held: asyncio.Event = field(default_factory=asyncio.Event)
    closed: list[str] = field(default_factory=list)


router = Router()


@router.handles(ECHO)
def echo(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ext_fields=cmd.ext_fields, body=cmd.body)


@router.handles(SLOW)
async def slow(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    return cmd.response(remark="slow")


@router.handles(BOOM)
def boom(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    raise HeaderError("SendMessageRequestHeader: required field 'topic' is missing")


@router.handles(ONEWAY)
def oneway(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    ctx.state.oneway_seen.put_nowait(cmd)
    return cmd.response()


@router.handles(HOLD)
async def hold(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    ctx.state.held.set()
    await asyncio.Event().wait()
    raise AssertionError("never answered")


@router.handles(CALLBACK)
async def callback(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    """Calls back into the client over the same connection, as a broker does."""
    answer = await ctx.connection.invoke(request(ECHO, {"from": "server"}), timeout=2)
    return cmd.response(ext_fields=answer.ext_fields)


@router.handles(BIG)
def big(ctx: RequestContext[State], cmd: RemotingCommand) -> RemotingCommand:
    """A small request with a large answer (as a pull of big messages)."""
    return cmd.response(body=b"b" * (1 << 20))


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer[State]]:
    state = State()
    srv = RemotingServer(router, state, host="127.0.0.1", port=0,
                         on_connection_closed=lambda c: state.closed.append(c.remote_addr))
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    cli = RemotingClient(router, State())
    try:
        yield cli
    finally:
        await cli.close()


def addr(srv: RemotingServer[State]) -> str:
    return f"127.0.0.1:{srv.port}"


async def test_request_response_in_both_serialize_types(server, client) -> None:
    for st in SerializeType:
        cmd = request(ECHO, {"k": "v"}, b"payload", serialize_type=st)
        resp = await client.invoke(addr(server), cmd)
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext_fields == {"k": "v"}
        assert resp.body == b"payload"
        assert resp.serialize_type == st


async def test_many_calls_in_flight_share_one_connection(server, client) -> None:
    calls = [client.invoke(addr(server), request(ECHO, {"i": str(i)})) for i in range(200)]
    answers = await asyncio.gather(*calls)
    assert [a.ext_fields["i"] for a in answers] == [str(i) for i in range(200)]
    assert len(server.connections) == 1


async def test_async_handler(server, client) -> None:
    resp = await client.invoke(addr(server), request(SLOW))
    assert resp.remark == "slow"


async def test_unknown_code_is_not_supported(server, client) -> None:
    resp = await client.invoke(addr(server), request(4242))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4242 not supported"


async def test_handler_failure_answers_system_error_and_keeps_the_connection(server,
                                                                             client) -> None:
    resp = await client.invoke(addr(server), request(BOOM))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "'topic' is missing" in (resp.remark or "")
    assert (await client.invoke(addr(server), request(ECHO))).code == ResponseCode.SUCCESS
    assert len(server.connections) == 1


async def test_a_failing_guard_answers_system_error_and_keeps_the_connection(
        server, client) -> None:
    """Before: an exception in the access guard escaped the connection's reader (a fatal
    traceback, the connection and its other calls lost)."""
    def guard(cmd: RemotingCommand, peer: str) -> RemotingCommand | None:
        if (cmd.ext_fields or {}).get("explode"):
            raise KeyError("explode")
        return None

    server.set_guard(guard)
    calls = [client.invoke(addr(server), request(ECHO, {"explode": "1"})),
             client.invoke(addr(server), request(ECHO, {"k": "v"}))]
    bad, ok = await asyncio.gather(*calls)
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "KeyError: 'explode'")
    assert (ok.code, ok.ext_fields) == (ResponseCode.SUCCESS, {"k": "v"})


async def test_invoke_many_answers_each_in_order_and_times_out_only_the_silent(
        server, client) -> None:
    cmds = [request(ECHO, {"i": "0"}), request(HOLD), request(BOOM), request(ECHO, {"i": "3"})]
    answers = await client.invoke_many(addr(server), cmds, timeout=0.2)
    assert [type(a).__name__ for a in answers] == [
        "RemotingCommand", "RemotingTimeoutError", "RemotingCommand", "RemotingCommand"]
    first, silent, failed, last = answers
    assert isinstance(first, RemotingCommand) and first.ext_fields == {"i": "0"}
    assert isinstance(last, RemotingCommand) and last.ext_fields == {"i": "3"}
    assert isinstance(failed, RemotingCommand) and failed.code == ResponseCode.SYSTEM_ERROR
    assert "within 0.2 s" in str(silent)
    conn = await client.connection(addr(server))
    assert conn.pending_calls == 0
    assert await client.invoke_many(addr(server), []) == []


async def test_invoke_many_fails_each_pending_call_when_the_connection_closes(
        server, client) -> None:
    state: State = server._dispatcher.state
    calls = asyncio.ensure_future(client.invoke_many(
        addr(server), [request(ECHO), request(HOLD)], timeout=30))
    await asyncio.wait_for(state.held.wait(), 5)
    await client.close()
    answered, lost = await calls
    assert isinstance(answered, RemotingCommand) and answered.code == ResponseCode.SUCCESS
    assert isinstance(lost, RemotingClosedError)


async def test_oneway_gets_no_answer(server, client) -> None:
    state: State = server._dispatcher.state
    await client.invoke_oneway(addr(server), request(ONEWAY, {"n": "1"}, oneway=True))
    seen = await asyncio.wait_for(state.oneway_seen.get(), 5)
    assert seen.is_oneway
    conn = await client.connection(addr(server))
    assert conn.pending_calls == 0


async def test_timeout_then_connection_still_usable(server, client) -> None:
    with pytest.raises(RemotingTimeoutError, match=r"within 0\.05 s"):
        await client.invoke(addr(server), request(HOLD), timeout=0.05)
    assert (await client.invoke(addr(server), request(ECHO))).code == ResponseCode.SUCCESS


async def test_closing_fails_pending_calls(server, client) -> None:
    state: State = server._dispatcher.state
    call = asyncio.ensure_future(client.invoke(addr(server), request(HOLD), timeout=30))
    await asyncio.wait_for(state.held.wait(), 5)
    await client.close()
    with pytest.raises(RemotingClosedError, match="closed before the answer"):
        await call


async def test_server_stop_fails_client_calls(client) -> None:
    state = State()
    srv = RemotingServer(router, state, host="127.0.0.1", port=0)
    await srv.start()
    call = asyncio.ensure_future(client.invoke(addr(srv), request(HOLD), timeout=30))
    await asyncio.wait_for(state.held.wait(), 5)
    await srv.stop()
    with pytest.raises(RemotingClosedError):
        await call


async def test_malformed_frame_closes_only_its_connection(server, client) -> None:
    good = await client.connection(addr(server))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">II", 7, 3) + b"{x}")
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
    writer.close()
    assert not good.closed
    assert (await client.invoke(addr(server), request(ECHO))).code == ResponseCode.SUCCESS


async def test_server_can_call_the_client_back(server, client) -> None:
    resp = await client.invoke(addr(server), request(CALLBACK))
    assert resp.ext_fields == {"from": "server"}


async def test_connection_close_is_reported(server, client) -> None:
    await client.invoke(addr(server), request(ECHO))
    conn = next(iter(server.connections))
    client.close_connection(addr(server))
    await conn.wait_closed()
    assert server._dispatcher.state.closed == [conn.remote_addr]


async def test_connect_errors_are_clear(client) -> None:
    srv = RemotingServer(router, State(), host="127.0.0.1", port=0)
    await srv.start()
    port = srv.port
    await srv.stop()
    with pytest.raises(RemotingConnectError, match=f"cannot connect to 127.0.0.1:{port}"):
        await client.invoke(f"127.0.0.1:{port}", request(ECHO))
    with pytest.raises(RemotingConnectError, match="not of the form host:port"):
        await client.invoke("nohost", request(ECHO))


async def test_port_in_use(server) -> None:
    other = RemotingServer(router, State(), host="127.0.0.1", port=server.port)
    with pytest.raises(PortInUseError, match=f"port {server.port} on 127.0.0.1 is already"):
        await other.start()


async def test_idle_connections_are_closed() -> None:
    srv = RemotingServer(router, State(), host="127.0.0.1", port=0, idle_timeout=0.05)
    await srv.start()
    try:
        cli = RemotingClient()
        conn = await cli.connection(addr(srv))
        await asyncio.wait_for(conn.wait_closed(), 5)
        await cli.close()
    finally:
        await srv.stop()


async def test_an_idle_connection_whose_peer_reads_nothing_is_dropped() -> None:
    """The peer pipelines requests of large answers and reads none of them.  Before: the idle
    closer's close waited for those answers to drain, for ever, and the connection kept its
    file descriptor; now the close aborts it after the grace period."""
    closed = asyncio.Event()
    srv = RemotingServer(router, State(), host="127.0.0.1", port=0, idle_timeout=0.05,
                         close_grace=0.2, on_connection_closed=lambda c: closed.set())
    await srv.start()
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, ("127.0.0.1", srv.port))
        await loop.sock_sendall(sock, b"".join(encode(request(BIG)) for _ in range(16)))
        await asyncio.wait_for(closed.wait(), 10)
        assert srv.connections == set()
    finally:
        sock.close()
        await srv.stop()


async def test_write_on_closed_connection() -> None:
    conn = Connection()
    with pytest.raises(RemotingSendError):
        conn.write(request(ECHO))
