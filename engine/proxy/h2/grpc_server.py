"""`GrpcFront`: the service's methods served over our own HTTP/2 (connection.py), on asyncio.

How this works: each accepted connection is a `GrpcConnection` protocol around a sans-IO
`ServerConnection`.  A request's HEADERS opens a call (calls.py reads its path, timeout and
metadata); a unary call's method runs as a task once its one request has arrived, and its
answer (HEADERS, the message, trailers) is queued in one step; a server-streaming call sends
each message as the method yields it; Telemetry, the one bidirectional method, starts at once
and reads its requests from a queue the DATA frames fill.  What the connection has to send is
written once per event-loop turn (`_flush` scheduled by the first call that has something),
so many answers share a write.  A call ends with the method's status (`abort`), UNKNOWN
"Application error processing RPC" if the method raised (logged), its deadline (the task
cancelled, DEADLINE_EXCEEDED) or the client's RST_STREAM (the task cancelled).  The
connection ending cancels its calls.  A peer silent for KEEPALIVE_TIME_S gets a PING; one
that answers nothing is taken for gone (a crash or a cut cable sends no FIN) and its
connection closed, as grpc-java's server does.

Ports: in the disabled mode a plaintext server, in the enforcing one a TLS server (ALPN h2);
in the permissive mode (5.3's default) `GrpcFront` accepts itself, in a thread blocked in
accept() (the kernel wakes one such waiter per connection, in turn, so workers sharing the
listener share a burst), and looks at each connection's first byte without reading it
(MSG_PEEK): 0x16, a TLS handshake record, makes it a TLS connection, anything else (the
HTTP/2 preface) a plaintext one; a connection silent for FIRST_BYTE_TIMEOUT_S is closed.
A graceful stop sends GOAWAY on every connection, waits for the calls in flight up to the
grace, then cancels what is left and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from engine.proxy.h2.calls import (
    DEADLINE_EXCEEDED,
    HEAD,
    INTERNAL,
    OK_TRAILERS,
    PREFIX,
    UNAVAILABLE,
    UNIMPLEMENTED,
    UNKNOWN,
    Aborted,
    CallError,
    MessageReader,
    ServicerContext,
    frame_message,
    http_error_headers,
    read_request,
    status_headers,
)
from engine.proxy.h2.connection import (
    ConnectionEnded,
    DataReceived,
    PingAcknowledged,
    RequestReceived,
    ServerConnection,
    StreamReset,
)
from engine.proxy.handlers import SERVICE, Method

# The permissive mode's rules and the peer syntax are the join process's (grpcio's front).
from engine.proxy.join_process import FIRST_BYTE_TIMEOUT_S, TLS_HANDSHAKE, peer_text

log = logging.getLogger("engine.proxy.h2")

MAX_CONCURRENT_STREAMS = 1000
#: Seconds the acceptor waits after accept() failed (out of descriptors) before it tries again.
ACCEPT_RETRY_S = 0.1
#: Seconds a worker's acceptor waits after each connection before it accepts the next.
ACCEPT_YIELD_S = 0.002
#: Seconds a connection we ended with a GOAWAY stays open for the peer to read it.
LINGER_S = 2.0
#: grpc-java's server keepalive, which Apache's proxy keeps: a connection the peer has sent
#: nothing on for KEEPALIVE_TIME_S gets a PING, and one that then sends nothing for
#: KEEPALIVE_TIMEOUT_S is a dead peer (gone without a FIN): its calls end and it is closed.
KEEPALIVE_TIME_S = 2 * 3600.0
KEEPALIVE_TIMEOUT_S = 20.0
#: grpc-java's description of a call whose method raised.
APPLICATION_ERROR = "Application error processing RPC"
_PATH_PREFIX = f"/{SERVICE}/"
#: Ends a Telemetry stream's requests.
_END: Any = object()


class Call:
    """One call in flight on a connection."""

    __slots__ = (
        "body",
        "context",
        "encoding",
        "method",
        "queue",
        "reader",
        "started",
        "stream_id",
        "task",
        "timer",
    )

    def __init__(self, stream_id: int, method: Method, context: ServicerContext,
                 encoding: str) -> None:
        self.stream_id = stream_id
        self.method = method
        self.context = context
        #: grpc-encoding of the requests, and Telemetry's reader of them (a unary request
        #: that is one uncompressed DATA frame needs none).
        self.encoding = encoding
        self.reader: MessageReader | None = None
        #: A unary call's DATA until its request is whole.
        self.body: list[bytes] = []
        self.task: asyncio.Task[None] | None = None
        #: Telemetry's requests (raw), then _END.
        self.queue: asyncio.Queue[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        #: The answer's HEADERS were sent (so its end is trailers, not Trailers-Only).
        self.started = False


class GrpcConnection(asyncio.Protocol):
    """One client connection: HTTP/2 in, the service's methods run, answers out."""

    def __init__(self, front: GrpcFront) -> None:
        self.front = front
        self.loop = asyncio.get_running_loop()
        self.conn = ServerConnection(max_concurrent_streams=MAX_CONCURRENT_STREAMS,
                                     max_header_list_size=front.max_header_list_size)
        self.calls: dict[int, Call] = {}
        self.transport: asyncio.Transport | None = None
        self.peer = "unknown"
        self._flush_pending = False
        self._closed = False
        #: When the peer last sent anything, when we last PINGed it, and the keepalive's
        #: next look at it.
        self._heard = self.loop.time()
        self._pinged = 0.0
        self._keepalive: asyncio.TimerHandle | None = None

    # --------------------------------------------------------------- transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        address = transport.get_extra_info("peername")  # None once the socket is gone
        self.peer = peer_text(address) if isinstance(address, tuple) else "unknown"
        self.front.connections.add(self)
        self.conn.initiate()
        self._flush()
        self._keepalive = self.loop.call_later(self.front.keepalive_time, self._keepalive_due)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._keepalive is not None:
            self._keepalive.cancel()
        self.front.connections.discard(self)
        for call in list(self.calls.values()):
            self._drop(call)
        self.front.idle_check()

    def data_received(self, data: bytes) -> None:
        self._heard = self.loop.time()
        for event in self.conn.receive(data):
            kind = type(event)
            if kind is DataReceived:
                self._on_data(event)  # type: ignore[arg-type]
            elif kind is RequestReceived:
                self._on_request(event)  # type: ignore[arg-type]
            elif kind is StreamReset:
                call = self.calls.get(event.stream_id)  # type: ignore[union-attr]
                if call is not None:
                    self._drop(call)
            elif kind is ConnectionEnded:
                self._on_end(event)  # type: ignore[arg-type]
            elif kind is PingAcknowledged:
                self._keepalive_reset()
        self._flush()

    # --------------------------------------------------------------- calls

    def _on_request(self, event: RequestReceived) -> None:
        sid = event.stream_id
        try:
            path, encoding, timeout, metadata = read_request(event.headers)
        except CallError as exc:
            if exc.http_status == 200:
                self._trailers_only(sid, exc.code, exc.details)
            else:  # not a gRPC request: an HTTP error, its text as the body
                self.conn.send_headers(sid, http_error_headers(exc.http_status, exc.code,
                                                               exc.details))
                self.conn.send_data(sid, exc.details.encode(), end_stream=True)
            return
        method = self.front.methods.get(path[len(_PATH_PREFIX):]) if path.startswith(
            _PATH_PREFIX) else None
        if method is None:
            self._trailers_only(sid, UNIMPLEMENTED, f"Method not found: {path[1:]}")
            return
        if self.front.stopping:
            self._trailers_only(sid, UNAVAILABLE, "Server is shutting down")
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        call = Call(sid, method, ServicerContext(metadata, self.peer, deadline), encoding)
        self.calls[sid] = call
        if timeout is not None:
            call.timer = self.loop.call_later(timeout, self._expire, call)
        if method.client_streaming:
            call.reader = MessageReader(encoding, self.front.max_message_size)
            call.queue = asyncio.Queue()
            call.task = self.loop.create_task(self._bidi(call))
            if event.end_stream:
                call.queue.put_nowait(_END)
        elif event.end_stream:
            self._fail(call, INTERNAL, "Half-closed without a request")

    def _on_data(self, event: DataReceived) -> None:
        call = self.calls.get(event.stream_id)
        if call is None or (call.task is not None and call.queue is None):
            return  # a call already answered or running: the client sends no more
        data = event.data
        if call.queue is not None:
            assert call.reader is not None
            try:
                for message in call.reader.feed(data):
                    call.queue.put_nowait(message)
            except CallError as exc:
                self._fail(call, exc.code, exc.details)
                return
            if event.end_stream:
                call.queue.put_nowait(_END)
            return
        if not event.end_stream:
            call.body.append(data)
            return
        if call.body:
            call.body.append(data)
            data = b"".join(call.body)
            call.body = []
        # The request's one message, usually one DATA frame holding exactly it.
        limit = self.front.max_message_size
        if (len(data) >= 5 and data[0] == 0 and PREFIX.unpack_from(data)[1] == len(data) - 5
                and len(data) - 5 <= limit):
            raw = data[5:]
        else:
            reader = MessageReader(call.encoding, limit)
            try:
                messages = list(reader.feed(data))
            except CallError as exc:
                self._fail(call, exc.code, exc.details)
                return
            if len(messages) != 1 or reader.pending:
                self._fail(call, INTERNAL, "Too many requests" if len(messages) > 1
                           else "Half-closed without a request")
                return
            raw = messages[0]
        runner = self._server_stream if call.method.server_streaming else self._unary
        call.task = self.loop.create_task(runner(call, raw))

    async def _unary(self, call: Call, raw: bytes) -> None:
        method = call.method
        try:
            response = await method.handler(method.parse(raw), call.context)
            if call.context.code is not None:  # aborted, and the abort was caught
                raise Aborted(call.context.code, call.context.details)
            payload = frame_message(method.serialize(response))
        except Aborted as exc:
            self._finish(call, exc.code, exc.details)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s of %s failed", method.name, self.peer)
            self._finish(call, UNKNOWN, APPLICATION_ERROR)
        else:
            if self.calls.pop(call.stream_id, None) is not None:
                if call.timer is not None:
                    call.timer.cancel()
                self.conn.send_unary(call.stream_id, HEAD, payload, OK_TRAILERS)
                self._schedule_flush()

    async def _server_stream(self, call: Call, raw: bytes) -> None:
        method = call.method
        await self._stream(call, method.handler(method.parse(raw), call.context))

    async def _bidi(self, call: Call) -> None:
        queue, parse = call.queue, call.method.parse
        assert queue is not None

        async def requests() -> AsyncIterator[Any]:
            while (item := await queue.get()) is not _END:
                yield parse(item)

        await self._stream(call, call.method.handler(requests(), call.context))

    async def _stream(self, call: Call, responses: AsyncIterator[Any]) -> None:
        serialize, sid = call.method.serialize, call.stream_id
        try:
            async for response in responses:
                if call.stream_id not in self.calls:
                    return
                if not call.started:
                    call.started = True
                    self.conn.send_headers(sid, HEAD)
                self.conn.send_data(sid, frame_message(serialize(response)))
                self._schedule_flush()
            if call.context.code is not None:
                raise Aborted(call.context.code, call.context.details)
        except Aborted as exc:
            self._finish(call, exc.code, exc.details)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s of %s failed", call.method.name, self.peer)
            self._finish(call, UNKNOWN, APPLICATION_ERROR)
        else:
            self._finish(call, 0, "")
        finally:
            with contextlib.suppress(Exception):
                await responses.aclose()  # type: ignore[attr-defined]

    # --------------------------------------------------------------- ends

    def _finish(self, call: Call, code: int, details: str) -> None:
        """End `call` with a status (trailers, or Trailers-Only before any message)."""
        if self.calls.pop(call.stream_id, None) is None:
            return
        if call.timer is not None:
            call.timer.cancel()
        if call.started:
            block = OK_TRAILERS if code == 0 else status_headers(code, details,
                                                                trailers_only=False)
        else:
            block = status_headers(code, details, trailers_only=True)
        self.conn.send_headers(call.stream_id, block, end_stream=True)
        self._schedule_flush()

    def _fail(self, call: Call, code: int, details: str) -> None:
        """End `call` with a status this layer decided; its method is cancelled."""
        task = call.task
        self._finish(call, code, details)
        if task is not None:
            task.cancel()

    def _drop(self, call: Call) -> None:
        """The client reset the call, or the connection ended: cancel it, send nothing."""
        self.calls.pop(call.stream_id, None)
        if call.timer is not None:
            call.timer.cancel()
        if call.task is not None:
            call.task.cancel()
        if call.queue is not None:
            call.queue.put_nowait(_END)

    def _expire(self, call: Call) -> None:
        """The call's deadline passed: its method is cancelled and the call ends
        DEADLINE_EXCEEDED (as grpc-core's server ends it; the client's own deadline has
        usually ended it on its side already)."""
        call.timer = None
        if self.calls.get(call.stream_id) is call:
            self._fail(call, DEADLINE_EXCEEDED, "Deadline Exceeded")

    def _trailers_only(self, stream_id: int, code: int, details: str) -> None:
        self.conn.send_headers(stream_id, status_headers(code, details, trailers_only=True),
                               end_stream=True)

    def _on_end(self, event: ConnectionEnded) -> None:
        """The peer's graceful GOAWAY lets the calls in flight finish (the peer closes);
        an error, its or ours, ends the connection."""
        if event.by_peer and event.error_code == 0:
            return
        self._flush()
        for call in list(self.calls.values()):
            self._drop(call)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if event.by_peer or not transport.can_write_eof():
            transport.close()
            return
        # Our GOAWAY: closing now, with the peer's bytes unread, would make the kernel reset
        # the connection and the GOAWAY could be lost.  Half-close instead, let the peer
        # read it (what it sends meanwhile is ignored) and close after LINGER_S at most.
        transport.write_eof()
        self.loop.call_later(LINGER_S, transport.close)

    # --------------------------------------------------------------- keepalive

    def _keepalive_due(self) -> None:
        """The peer silent for keepalive_time: a PING, answered within keepalive_timeout
        or the peer is gone."""
        if self._closed:
            return
        silent = self.loop.time() - self._heard
        if silent < self.front.keepalive_time:
            self._keepalive = self.loop.call_later(self.front.keepalive_time - silent,
                                                   self._keepalive_due)
            return
        self.conn.ping()
        self._flush()
        self._pinged = self.loop.time()
        self._keepalive = self.loop.call_later(self.front.keepalive_timeout, self._dead_peer)

    def _keepalive_reset(self) -> None:
        """The PING answered: the next after keepalive_time more."""
        if self._keepalive is not None:
            self._keepalive.cancel()
        self._keepalive = self.loop.call_later(self.front.keepalive_time, self._keepalive_due)

    def _dead_peer(self) -> None:
        if self._closed:
            return
        if self._heard > self._pinged:  # no ACK, but not silent either: alive
            self._keepalive_due()
            return
        log.warning("%s answered no keepalive PING in %.0f s: a dead peer, its connection "
                    "closed and its %d calls ended", self.peer, self.front.keepalive_timeout,
                    len(self.calls))
        if self.transport is not None:  # connection_lost ends the calls
            self.transport.abort()  # what is unsent would never drain to a dead peer

    # --------------------------------------------------------------- writes

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        out = self.conn.data_to_send()
        if out and not self._closed and self.transport is not None:
            self.transport.write(out)
        if self.front.stopping and not self.calls:
            self.front.idle_check()

    def goaway(self) -> None:
        """Refuse new calls; those in flight go on."""
        self.conn.goaway()
        self._flush()

    def close(self) -> None:
        for call in list(self.calls.values()):
            self._drop(call)
        if self.transport is not None:
            self.transport.close()


class GrpcFront:
    """The service's methods on a port, over our HTTP/2."""

    def __init__(self, methods: dict[str, Method], *, max_message_size: int,
                 max_header_list_size: int = 16 * 1024) -> None:
        self.methods = methods
        self.max_message_size = max_message_size
        self.max_header_list_size = max_header_list_size
        self.connections: set[GrpcConnection] = set()
        self.stopping = False
        self.first_byte_timeout = FIRST_BYTE_TIMEOUT_S
        self.keepalive_time = KEEPALIVE_TIME_S
        self.keepalive_timeout = KEEPALIVE_TIMEOUT_S
        self._servers: list[asyncio.AbstractServer] = []
        #: The permissive mode's listening socket, its acceptor thread, and whether other
        #: processes accept from it too.
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._shared = False
        self._sniffers: set[asyncio.Task[None]] = set()
        self._idle: asyncio.Event | None = None

    def _protocol(self) -> GrpcConnection:
        return GrpcConnection(self)

    async def serve(self, listener: socket.socket, tls: ssl.SSLContext | None, *,
                    permissive: bool, shared: bool = False) -> None:
        """Serve on `listener` (bound and listening): TLS only when `tls` is given and not
        `permissive`; TLS or plaintext by each connection's first byte when `permissive`.
        `shared`: other processes accept from `listener` too (the workers), so it is never
        shut down here."""
        loop = asyncio.get_running_loop()
        if permissive:
            listener.setblocking(True)
            self._listener, self._shared = listener, shared
            self._acceptor = threading.Thread(target=self._accept, args=(listener, tls, loop),
                                              name="grpc-accept", daemon=True)
            self._acceptor.start()
        else:
            self._servers.append(await loop.create_server(self._protocol, sock=listener,
                                                          ssl=tls))

    def _accept(self, listener: socket.socket, tls: ssl.SSLContext | None,
                loop: asyncio.AbstractEventLoop) -> None:
        """The permissive mode's acceptor thread: a blocking accept() per connection.  The
        kernel wakes one blocked accept() per new connection, the longest waiting first, so
        workers sharing the listener take a burst in turn (readiness on an event loop wakes
        every worker, and the first awake takes them all)."""
        while True:
            try:
                sock, _ = listener.accept()
            except OSError as exc:
                if self.stopping or exc.errno in (errno.EBADF, errno.EINVAL):
                    return  # stopped: the listener is shut down or closed
                log.warning("accept on the gRPC port failed: %s", exc)  # out of descriptors
                time.sleep(ACCEPT_RETRY_S)
                continue
            if self.stopping:
                sock.close()
                return
            try:
                loop.call_soon_threadsafe(self._adopt, sock, tls)
            except RuntimeError:  # the event loop is closed
                sock.close()
                return
            if self._shared:
                # Leave the next connection of a burst to the other workers' acceptors: the
                # kernel has woken one of them for it, but this thread, back in accept()
                # first, would take it from the queue.
                time.sleep(ACCEPT_YIELD_S)

    def _adopt(self, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
        if self.stopping:
            sock.close()
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.get_running_loop().create_task(self._sniff(sock, tls))
        self._sniffers.add(task)
        task.add_done_callback(self._sniffers.discard)

    async def _sniff(self, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        fd = sock.fileno()
        def ready() -> None:
            if not readable.done():  # the reader may fire again before it is removed
                readable.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await asyncio.wait_for(readable, self.first_byte_timeout)
            first = sock.recv(1, socket.MSG_PEEK)
        except (TimeoutError, OSError):
            first = b""
        finally:
            loop.remove_reader(fd)
        if not first or self.stopping:
            sock.close()
            return
        try:
            await loop.connect_accepted_socket(
                self._protocol, sock, ssl=tls if first[0] == TLS_HANDSHAKE else None)
        except (OSError, ssl.SSLError) as exc:
            log.debug("connection from the gRPC port dropped: %s", exc)
            sock.close()

    def idle_check(self) -> None:
        if self._idle is not None and not any(c.calls for c in self.connections):
            self._idle.set()

    async def stop(self, grace: float) -> None:
        """Stop accepting, GOAWAY every connection, wait up to `grace` seconds for the
        calls in flight, then end what is left and close every connection."""
        self.stopping = True
        if self._listener is not None and not self._shared:
            with contextlib.suppress(OSError):  # wakes the acceptor's accept() (EINVAL)
                self._listener.shutdown(socket.SHUT_RDWR)
            if self._acceptor is not None:
                await asyncio.to_thread(self._acceptor.join)
        # A shared listener stays as it is: the acceptor closes what it accepts from now on
        # and ends with the process.
        self._listener = self._acceptor = None
        for task in list(self._sniffers):
            task.cancel()
        for server in self._servers:
            server.close()
        self._idle = asyncio.Event()
        for connection in list(self.connections):
            connection.goaway()
        self.idle_check()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()

