"""`rocketmq_rpc_latency` (5.3's `RemotingMetricsManager`): requests timed where they are answered.

How this works: with metrics on, the broker's servers dispatch through a `TimedDispatcher`
(with DISABLE it is never installed, so no request pays anything).  It notes the time a read
of requests arrives and which requests were answered inline, deferred or refused; when the
read's answers have been written it takes the time once more, tallies the answers by label
set and adds them to plain bucket counters (`RpcLatency.table`: a list of ints per label set,
the bucket found by `bisect`).  A deferred answer (a long-polling pull, a send waiting for its group
commit) is counted when its task's answer is written.  The collector turns the table into the
histogram at scrape time; nothing on the request path touches prometheus_client.

Labels as 5.3 writes them: `request_code` and `response_code` are the codes' names in lower
case (the number for a code without a name), `is_long_polling` is true for a pull that was held
(5.3's `isSuspended`), `result` is `success`, `oneway` (an answer a oneway request does not get)
or `write_channel_failed` (the connection was closed before the answer went out).  The latency
is whole milliseconds from the read to the write (5.3: `elapsed(MILLISECONDS)` of the request's
process timer); every inline answer of one read is counted with the read's time.
"""

from __future__ import annotations

import inspect
from bisect import bisect_left
from collections.abc import Sequence
from time import perf_counter
from typing import Any

from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode, ResponseCode, SerializeType
from engine.protocol.command import FLAG_ONEWAY, RemotingCommand
from engine.remoting.connection import Connection
from engine.remoting.dispatch import Guard, RequestDispatcher
from engine.remoting.router import Handler, ManyHandler, RequestContext, Route, Router

#: 5.3's rpcCostTimeBuckets, in ms.
BOUNDS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
#: One counter per bucket, one for +Inf, then the sum of the milliseconds.
SLOTS = len(BOUNDS) + 2

RESULT_SUCCESS = "success"
RESULT_ONEWAY = "oneway"
RESULT_WRITE_CHANNEL_FAILED = "write_channel_failed"

#: (request code, response code, is long polling, result)
Key = tuple[int, int, bool, str]
#: a run of requests of one code and what each was answered with
Answered = tuple[Sequence[RemotingCommand], Sequence[Any]]

_JSON_SUCCESS = b'{"code":0,'
_ROCKETMQ = int(SerializeType.ROCKETMQ)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_NOT_SUPPORTED = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


class RpcLatency:
    """Counts of answered requests by label set and latency bucket, since the broker started."""

    def __init__(self) -> None:
        self.table: dict[Key, list[int]] = {}

    def add(self, key: Key, ms: int) -> None:
        counts = self.table.get(key)
        if counts is None:
            counts = self.table[key] = [0] * SLOTS
        counts[bisect_left(BOUNDS, ms)] += 1
        counts[-1] += ms


def frame_code(frame: bytes) -> int:
    """The response code of an encoded answer frame (length prefix included)."""
    if frame[4] == _ROCKETMQ:
        return int.from_bytes(frame[8:10], "big", signed=True)
    if frame.startswith(_JSON_SUCCESS, 8):
        return 0
    return int(frame[16:frame.index(b",", 16)])  # the JSON header opens with {"code":N,


def request_code_name(code: int) -> str:
    """5.3's `RemotingHelper.getRequestCodeDesc`: the constant's name in lower case."""
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return str(code)


def response_code_name(code: int) -> str:
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


class _TimingRouter(Router):
    """The broker's routes, each handler noting what it answered in the dispatcher's read."""

    def __init__(self, router: Router, dispatcher: TimedDispatcher) -> None:
        super().__init__()
        self._inner = router
        self._dispatcher = dispatcher
        self._timed: dict[int, Route | None] = {}

    def lookup(self, code: int) -> Route | None:
        try:
            return self._timed[code]
        except KeyError:
            route = self._inner.lookup(code)
            timed = self._timed[code] = None if route is None else Route(
                self._handler(route.handler), route.is_async,
                None if route.many is None else self._many(route.many))
            return timed

    @property
    def codes(self) -> frozenset[int]:
        return self._inner.codes

    def _handler(self, handler: Handler) -> Handler:
        dispatcher = self._dispatcher

        def timed(ctx: RequestContext[Any], cmd: RemotingCommand) -> Any:
            try:
                result = handler(ctx, cmd)
            except Exception as exc:
                dispatcher.answered.append(((cmd,), (exc,)))
                raise
            dispatcher.answered.append(((cmd,), (result,)))
            return result

        return timed

    def _many(self, many: ManyHandler) -> ManyHandler:
        dispatcher = self._dispatcher

        def timed(ctx: RequestContext[Any], run: list[RemotingCommand]) -> Sequence[Any]:
            try:
                results = many(ctx, run)
            except Exception as exc:
                dispatcher.answered.append((run, [exc] * len(run)))
                raise
            dispatcher.answered.append((run, results))
            return results

        return timed


class TimedDispatcher(RequestDispatcher[BrokerState]):
    """A `RequestDispatcher` that counts every answer in `latency`."""

    def __init__(self, router: Router, state: BrokerState, latency: RpcLatency,
                 long_polling: frozenset[int] = frozenset({RequestCode.PULL_MESSAGE})) -> None:
        super().__init__(_TimingRouter(router, self), state)
        self.latency = latency
        #: the runs of requests (of one code) of the read being dispatched, each with one
        #: result per request: a handler's result or exception, a refusal, or the code of an
        #: answer sent even to oneways
        self.answered: list[Answered] = []
        self._long_polling = long_polling
        self._deferred: dict[int, float] = {}  # id of a request answered later: its start

    def __call__(self, conn: Connection, commands: list[RemotingCommand]) -> None:
        answered = self.answered = []
        start = perf_counter()
        super().__call__(conn, commands)
        if answered:
            self.count(answered, start, conn.closed)

    def count(self, answered: list[Answered], start: float, closed: bool) -> None:
        """Count the answers of one read (written now; not at all if `closed`)."""
        ms = int((perf_counter() - start) * 1000)
        # (request code, response code, oneway answer) -> answers
        tally: dict[tuple[int, int, int], int] = {}
        get = tally.get
        for run, results in answered:
            code = run[0].code  # a run is of one request code
            done = 0  # the common case: encoded SUCCESS answers to requests that get them
            for cmd, result in zip(run, results, strict=True):
                kind = result.__class__
                if kind is bytes:
                    if result.startswith(_JSON_SUCCESS, 8) and not cmd.flag & FLAG_ONEWAY:
                        done += 1
                        continue
                    key = (code, frame_code(result), cmd.flag & FLAG_ONEWAY)
                elif result is None:  # no answer (yet): the handler answers itself, or never
                    continue
                elif isinstance(result, RemotingCommand):
                    key = (code, result.code, cmd.flag & FLAG_ONEWAY)
                elif kind is int:  # not supported: answered even to a oneway
                    key = (code, result, 0)
                elif isinstance(result, Exception):  # SYSTEM_ERROR, also to a oneway
                    key = (code, _SYSTEM_ERROR, 0)
                elif inspect.isawaitable(result):
                    self._deferred[id(cmd)] = start
                    continue
                else:
                    continue
                tally[key] = get(key, 0) + 1
            if done:
                key = (code, 0, 0)
                tally[key] = get(key, 0) + done
        failed = RESULT_WRITE_CHANNEL_FAILED if closed else RESULT_SUCCESS
        bucket = bisect_left(BOUNDS, ms)
        table = self.latency.table
        for (request, response, oneway), n in tally.items():
            full = (request, response, False, RESULT_ONEWAY if oneway else failed)
            counts = table.get(full)
            if counts is None:
                counts = table[full] = [0] * SLOTS
            counts[bucket] += n
            counts[-1] += ms * n

    def _unsupported(self, cmd: RemotingCommand, addr: str) -> bytes:
        self.answered.append(((cmd,), (_NOT_SUPPORTED,)))
        return super()._unsupported(cmd, addr)

    def _check(self, guard: Guard, cmd: RemotingCommand, conn: Connection
               ) -> RemotingCommand | None:
        refusal = super()._check(guard, cmd, conn)
        if refusal is not None:
            self.answered.append(((cmd,), (refusal,)))
        return refusal

    def _finish(self, conn: Connection, cmd: RemotingCommand, task: Any) -> None:
        closed = conn.closed
        super()._finish(conn, cmd, task)
        start = self._deferred.pop(id(cmd), None)
        if start is None or task.cancelled():
            return
        exc = task.exception()
        response = None if exc is not None else task.result()
        if exc is not None:
            code = _SYSTEM_ERROR
        elif isinstance(response, bytes):
            code = frame_code(response)
        elif isinstance(response, RemotingCommand):
            code = response.code
        else:
            return
        if cmd.is_oneway:
            outcome = RESULT_ONEWAY
        elif closed:
            outcome = RESULT_WRITE_CHANNEL_FAILED
        else:
            outcome = RESULT_SUCCESS
        self.latency.add((cmd.code, code, cmd.code in self._long_polling, outcome),
                         int((perf_counter() - start) * 1000))
