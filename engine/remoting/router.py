"""Routing of requests to handlers: `@router.handles(RequestCode.X)`, one router per module.

A handler is ``async def handle(ctx: RequestContext[S], cmd: RemotingCommand) ->
RemotingCommand | None`` (a plain ``def`` works too and saves a coroutine on hot paths).  It
returns the response, or None to answer later itself (long polling) or not at all.  A hot
handler may return its response already encoded (the whole frame as `bytes`).

A route may also have a handler of many requests (`@router.handles_many`), called with the
consecutive requests of one code read together, so that their work is shared (one store
append for many sends).  It returns one result per request, in order: what the single
handler would have returned, or the exception that request failed with.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from engine.remoting.connection import Connection

S = TypeVar("S")

HandlerResult = RemotingCommand | bytes | None
Handler = Callable[["RequestContext[Any]", RemotingCommand],
                   Awaitable[HandlerResult] | HandlerResult]
ManyHandler = Callable[["RequestContext[Any]", list[RemotingCommand]],
                       Sequence[Awaitable[HandlerResult] | HandlerResult | Exception]]


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[S]):
    """What a handler knows besides the request: the server's state and the peer connection."""

    state: S
    connection: Connection


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    is_async: bool
    many: ManyHandler | None = None


class Router:
    """Maps request codes to handlers; routers of several modules are merged with `include`."""

    def __init__(self) -> None:
        self._routes: dict[int, Route] = {}

    def handles(self, *codes: int) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            for code in codes:
                if int(code) in self._routes:
                    raise ValueError(f"request code {int(code)} already has a handler")
                self._routes[int(code)] = Route(handler, inspect.iscoroutinefunction(handler))
            return handler

        return register

    def handles_many(self, *codes: int) -> Callable[[ManyHandler], ManyHandler]:
        """Give the routes of `codes` (registered with `handles`) a handler of many requests."""
        def register(many: ManyHandler) -> ManyHandler:
            for code in codes:
                self._routes[int(code)] = replace(self._routes[int(code)], many=many)
            return many

        return register

    def include(self, other: Router) -> Router:
        for code, route in other._routes.items():
            if code in self._routes:
                raise ValueError(f"request code {code} already has a handler")
            self._routes[code] = route
        return self

    def lookup(self, code: int) -> Route | None:
        return self._routes.get(code)

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(self._routes)
