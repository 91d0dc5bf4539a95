"""Runs routed handlers for the requests a connection received and writes their answers.

How this works: plain-function handlers answer inline (a `RemotingCommand`, or its frame
already encoded as `bytes`), and the inline answers to one read are written in groups, each
with one `writelines` (one syscall; pipelined clients get their answers in few segments).
Consecutive requests of one code whose route has a handler of many requests go to it in one
call, which returns one result (or exception) per request.  A handler that returns an
awaitable (an `async def`, or a plain function that needs to wait, e.g. for a group commit)
finishes in a task whose answer is written when ready.  A handler (or the access guard) that
raises is answered with SYSTEM_ERROR and a remark; the connection stays up.  Unknown codes get
REQUEST_CODE_NOT_SUPPORTED.  As in 4.9.x, a oneway request gets no processor answer but
does get those two error answers.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from engine.protocol.codes import ResponseCode
from engine.protocol.command import FLAG_ONEWAY, RemotingCommand, encode
from engine.protocol.errors import ProtocolError
from engine.remoting.connection import Connection
from engine.remoting.errors import RemotingError
from engine.remoting.router import RequestContext, Router

log = logging.getLogger(__name__)

#: Answers of one read are written in groups of this many, so that a pipelining client can
#: work on the first answers while the rest are computed (one write per read measured ~20%
#: slower end to end: client and server took turns instead of overlapping).
WRITE_EVERY = 8

S = TypeVar("S")

#: Checks a request before its handler runs: None to go on, or the refusal to answer with.
Guard = Callable[[RemotingCommand, str], "RemotingCommand | None"]


def error_response(cmd: RemotingCommand, exc: BaseException) -> RemotingCommand:
    """SYSTEM_ERROR with a remark that says what went wrong."""
    if isinstance(exc, (ProtocolError, RemotingError)):
        remark = str(exc)
    else:
        remark = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return cmd.response(ResponseCode.SYSTEM_ERROR, remark)


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f" request type {cmd.code} not supported")


class RequestDispatcher(Generic[S]):
    """Dispatches requests of any number of connections to one router over one state."""

    def __init__(self, router: Router, state: S) -> None:
        self.router = router
        self.state = state
        self._contexts: dict[int, RequestContext[S]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        #: Access control (engine.auth); None when it is off: one test per request.
        self.guard: Guard | None = None

    def __call__(self, conn: Connection, commands: list[RemotingCommand]) -> None:
        ctx = self._contexts.get(id(conn))
        if ctx is None:
            ctx = self._contexts[id(conn)] = RequestContext(self.state, conn)
        out: list[bytes] = []
        guard = None if conn.trusted else self.guard
        lookup = self.router.lookup
        addr = conn.remote_addr
        refused_at, refusal = -1, None
        i, n = 0, len(commands)
        while i < n:
            cmd = commands[i]
            if guard is not None:
                refused = refusal if i == refused_at else self._check(guard, cmd, conn)
                if refused is not None:
                    if not cmd.flag & FLAG_ONEWAY:
                        out.append(encode(refused))
                    i += 1
                    continue
            code = cmd.code
            route = lookup(code)
            if route is None:
                out.append(self._unsupported(cmd, addr))
                i += 1
                continue
            j = i + 1
            many = route.many
            if many is not None:
                while j < n and commands[j].code == code:
                    if guard is not None:  # a refused request ends the run
                        refusal = self._check(guard, commands[j], conn)
                        if refusal is not None:
                            refused_at = j
                            break
                    j += 1
            run: Sequence[RemotingCommand]
            results: Sequence[Any]
            if j - i > 1:
                assert many is not None
                run = commands[i:j]
                try:
                    results = many(ctx, run)
                except Exception as exc:
                    results = [exc] * len(run)
            else:
                run = (cmd,)
                try:
                    results = (route.handler(ctx, cmd),)
                except Exception as exc:
                    results = (exc,)
            i = j
            for cmd, result in zip(run, results, strict=True):
                if result is None:
                    continue
                if isinstance(result, bytes) or isinstance(result, RemotingCommand):  # noqa: SIM101
                    if not cmd.flag & FLAG_ONEWAY:
                        out.append(result if isinstance(result, bytes) else encode(result))
                        if len(out) >= WRITE_EVERY and not conn.closed:
                            conn.write_frames(out)
                            out = []
                elif isinstance(result, Exception):
                    self._log_failure(cmd, conn, result)
                    out.append(encode(error_response(cmd, result)))
                elif inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(functools.partial(self._finish, conn, cmd))
        if out and not conn.closed:
            conn.write_frames(out)

    def _unsupported(self, cmd: RemotingCommand, addr: str) -> bytes:
        """The encoded REQUEST_CODE_NOT_SUPPORTED answer to a request no route handles."""
        log.debug("request code %d from %s not supported", cmd.code, addr)
        return encode(not_supported(cmd))

    def _check(self, guard: Guard, cmd: RemotingCommand, conn: Connection
               ) -> RemotingCommand | None:
        """The guard's refusal of `cmd`, or an error answer if the guard itself fails."""
        try:
            return guard(cmd, conn.remote_addr)
        except Exception as exc:
            self._log_failure(cmd, conn, exc)
            return error_response(cmd, exc)

    def _finish(self, conn: Connection, cmd: RemotingCommand, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        response = task.result() if exc is None else None
        if exc is not None:
            self._log_failure(cmd, conn, exc)
            response = error_response(cmd, exc)
        if response is None or cmd.is_oneway or conn.closed:
            return
        if isinstance(response, bytes):
            conn.write_bytes(response)
        else:
            conn.write(response)

    def _log_failure(self, cmd: RemotingCommand, conn: Connection, exc: BaseException) -> None:
        if isinstance(exc, ProtocolError):
            log.warning("bad request code %d from %s: %s", cmd.code, conn.remote_addr, exc)
        else:
            log.error("handler for request code %d from %s failed", cmd.code, conn.remote_addr,
                      exc_info=exc)

    def forget(self, conn: Connection) -> None:
        self._contexts.pop(id(conn), None)

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
