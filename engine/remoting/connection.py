"""One TCP connection speaking the remoting protocol, in either direction.

How this works: a `Connection` is an asyncio `Protocol`; `data_received` is its single reader.
It feeds a `FrameDecoder`, resolves the pending future of each response by opaque, and hands
each request to a dispatcher (the server's router, or a client's handler of broker-initiated
requests).  Every call has a timeout (a timer handle, cheaper than `wait_for`); closing the
connection fails every pending call with `RemotingClosedError`.  A malformed frame closes only
this connection.  A close lets the connection send what it holds for a grace period, then
aborts it: a peer that reads nothing cannot keep a closed connection (and its file
descriptor) for ever.  Single frames (`write`, `write_bytes`: requests, and answers finished
by tasks, e.g. every send waiting for a SYNC_FLUSH group commit) are gathered until the event
loop's next turn and written with one `writelines`: the answers a group commit releases
together leave in one syscall instead of one each; `write_frames` and `close` write what is
gathered first, so the order on the wire is the order of the calls.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import cast

from engine.protocol.command import FLAG_ONEWAY, RemotingCommand, encode
from engine.protocol.errors import FrameError
from engine.protocol.frame import DEFAULT_MAX_FRAME, FrameDecoder
from engine.remoting.errors import (
    RemotingClosedError,
    RemotingError,
    RemotingSendError,
    RemotingTimeoutError,
)

log = logging.getLogger(__name__)

#: Opaques are unique per process, as in Java (one static counter); int32 wrap-around.
_opaques = itertools.count(1)

Dispatcher = Callable[["Connection", list[RemotingCommand]], None]

#: Seconds a closing connection may take to send the bytes it holds before it is aborted.
CLOSE_GRACE_S = 2.0


def next_opaque() -> int:
    return next(_opaques) & 0x7FFFFFFF


class Connection(asyncio.Protocol):
    """A remoting connection: requests out with `invoke`/`send_oneway`, requests in via dispatch."""

    def __init__(
        self,
        dispatcher: Dispatcher | None = None,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame)
        self._on_close = on_close
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._closed_event: asyncio.Event | None = None
        self.remote_addr = "?"
        self.local_addr = "?"
        self.last_activity = 0.0
        #: A connection of this process's own components (the local proxy's, in-process):
        #: its requests are the server's own, and the access guard does not check them.
        self.trusted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._abort_timer: asyncio.TimerHandle | None = None
        self._gathered: list[bytes] = []  # single frames written at the loop's next turn

    # -------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass; it has the same API.
        self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self._closed_event = asyncio.Event()
        self.last_activity = self._loop.time()
        self.remote_addr = _sockname(transport.get_extra_info("peername"))
        self.local_addr = _sockname(transport.get_extra_info("sockname"))

    def data_received(self, data: bytes) -> None:
        if self._loop is not None:
            self.last_activity = self._loop.time()
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.remote_addr, exc)
            self.close()
            return
        requests: list[RemotingCommand] | None = None
        for cmd in commands:
            if cmd.is_response:
                fut = self._pending.pop(cmd.opaque, None)
                if fut is None:
                    log.debug("response with unknown opaque %d from %s dropped",
                              cmd.opaque, self.remote_addr)
                elif not fut.done():
                    fut.set_result(cmd)
            elif self._dispatcher is not None:
                if requests is None:
                    requests = []
                requests.append(cmd)
            else:
                log.debug("request code %d from %s ignored: no dispatcher",
                          cmd.code, self.remote_addr)
        if requests:
            self._dispatcher(self, requests)  # type: ignore[misc]

    def eof_received(self) -> bool:
        """The peer sent all it will: close (within the grace), as asyncio would, but timed."""
        self.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._abort_timer is not None:
            self._abort_timer.cancel()
            self._abort_timer = None
        pending, self._pending = self._pending, {}
        for opaque, fut in pending.items():
            if not fut.done():
                fut.set_exception(RemotingClosedError(
                    f"connection to {self.remote_addr} closed before the answer to "
                    f"request #{opaque} arrived", self.remote_addr))
        if self._closed_event is not None:
            self._closed_event.set()
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("connection close callback failed")

    def pause_writing(self) -> None:  # the peer reads slower than we write: stop reading
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    # -------------------------------------------------------------- API

    @property
    def closed(self) -> bool:
        return self._closed or self._transport is None or self._transport.is_closing()

    def write(self, cmd: RemotingCommand) -> None:
        """Write one command as is (responses, or requests already carrying their opaque)."""
        self.write_bytes(encode(cmd))

    def write_bytes(self, data: bytes) -> None:
        """Write one encoded frame, with the others written before the loop's next turn."""
        if self.closed:
            raise RemotingSendError(f"connection to {self.remote_addr} is closed",
                                    self.remote_addr)
        loop = self._loop
        assert self._transport is not None and loop is not None
        gathered = self._gathered
        if not gathered:
            loop.call_soon(self._write_gathered)
        gathered.append(data)
        self.last_activity = loop.time()

    def _write_gathered(self) -> None:
        frames, self._gathered = self._gathered, []
        if frames and self._transport is not None and not self.closed:
            self._transport.writelines(frames)

    def write_frames(self, frames: list[bytes]) -> None:
        """Write encoded frames with one `writelines` (one syscall when the socket takes it)."""
        if self.closed:
            raise RemotingSendError(f"connection to {self.remote_addr} is closed",
                                    self.remote_addr)
        assert self._transport is not None
        if self._gathered:  # written first: the wire keeps the order of the calls
            frames, self._gathered = self._gathered + frames, []
        self._transport.writelines(frames)
        if self._loop is not None:
            self.last_activity = self._loop.time()

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that expects no answer."""
        self.write(RemotingCommand(
            code=cmd.code, opaque=next_opaque(), flag=cmd.flag | FLAG_ONEWAY,
            language=cmd.language, version=cmd.version, remark=cmd.remark,
            ext_fields=cmd.ext_fields, body=cmd.body, serialize_type=cmd.serialize_type,
        ))

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response.

        Raises:
            RemotingTimeoutError: no answer within `timeout` seconds.
            RemotingClosedError: the connection closed first.
            RemotingSendError: the connection was already closed.
        """
        opaque = next_opaque()
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = fut
        try:
            self.write(cmd.with_opaque(opaque))
        except BaseException:
            self._pending.pop(opaque, None)
            raise
        timer = loop.call_later(timeout, self._expire, opaque, timeout, cmd.code)
        try:
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    async def invoke_many(self, cmds: Sequence[RemotingCommand], timeout: float
                          ) -> list[RemotingCommand | RemotingError]:
        """Send requests at once and wait for all their answers, with one timer for all:
        the answer to each in order, or the error it failed with (no answer within
        `timeout` seconds, or the connection closed first).

        Raises:
            RemotingSendError: the connection was already closed.
        """
        loop = self._loop or asyncio.get_running_loop()
        pending = self._pending
        sent: list[tuple[int, asyncio.Future[RemotingCommand]]] = []
        try:
            for cmd in cmds:
                opaque = next_opaque()
                fut: asyncio.Future[RemotingCommand] = loop.create_future()
                pending[opaque] = fut
                sent.append((opaque, fut))
                self.write(cmd.with_opaque(opaque))
        except BaseException:
            for opaque, _ in sent:
                pending.pop(opaque, None)
            raise
        if not sent:
            return []
        timer = loop.call_later(timeout, self._expire_many, sent, timeout, cmds[0].code)
        try:
            answers = await asyncio.gather(*(fut for _, fut in sent), return_exceptions=True)
        finally:
            timer.cancel()
            for opaque, _ in sent:
                pending.pop(opaque, None)
        out: list[RemotingCommand | RemotingError] = []
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, RemotingError):
                raise answer
            out.append(answer)
        return out

    def _expire_many(self, sent: list[tuple[int, asyncio.Future[RemotingCommand]]],
                     timeout: float, code: int) -> None:
        for opaque, _ in sent:
            self._expire(opaque, timeout, code)

    def _expire(self, opaque: int, timeout: float, code: int) -> None:
        fut = self._pending.pop(opaque, None)
        if fut is not None and not fut.done():
            fut.set_exception(RemotingTimeoutError(
                f"no answer from {self.remote_addr} to request code {code} within "
                f"{timeout:g} s", self.remote_addr))

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """Close once the bytes already written are sent, or abort after `grace` seconds."""
        transport = self._transport
        if transport is None or self._closed:
            return
        if not transport.is_closing():
            self._write_gathered()
            transport.close()
        if self._abort_timer is None and self._loop is not None:  # also when asyncio closed it
            self._abort_timer = self._loop.call_later(grace, self._abort_unsent, grace)

    def _abort_unsent(self, grace: float) -> None:
        self._abort_timer = None
        if self._transport is None or self._closed:
            return
        log.warning("dropping connection to %s: %d bytes not taken within %g s of its close",
                    self.remote_addr, self._transport.get_write_buffer_size(), grace)
        self.abort()

    def abort(self) -> None:
        """Close now, dropping unsent answers (a peer that stopped reading them)."""
        if self._transport is not None and not self._closed:
            self._transport.abort()

    async def wait_closed(self) -> None:
        if self._closed_event is not None:
            await self._closed_event.wait()

    @property
    def pending_calls(self) -> int:
        return len(self._pending)


def _sockname(info: object) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        return f"{info[0]}:{info[1]}"
    return "?"
