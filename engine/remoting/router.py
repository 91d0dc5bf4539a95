"""Routing of requests to handlers: `@router.handles(RequestCode.X)`, one router per module.

A handler is ``async def handle(ctx: RequestContext[S], cmd: RemotingCommand) ->
RemotingCommand | None`` (a plain ``def`` works too and saves a coroutine on hot paths).  It
returns the response, or None to answer later itself (long polling) or not at all.  A hot
handler may return its response already encoded (the whole frame as `bytes`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from engine.remoting.connection import Connection

S = TypeVar("S")

HandlerResult = RemotingCommand | bytes | None
Handler = Callable[["RequestContext[Any]", RemotingCommand],
                   Awaitable[HandlerResult] | HandlerResult]


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[S]):
    """What a handler knows besides the request: the server's state and the peer connection."""

    state: S
    connection: Connection


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    is_async: bool


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
