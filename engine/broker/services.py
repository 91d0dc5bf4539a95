"""The broker's periodic duties (offset flush, client expiry, stats) as small Services."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.common.service import Service


class PeriodicService(Service):
    """Runs `action` every `interval` seconds; `action` may be a plain or async callable."""

    def __init__(self, name: str, interval: float,
                 action: Callable[[], Awaitable[None] | None]) -> None:
        super().__init__(interval)
        self.name = name
        self.action = action

    async def run_once(self) -> None:
        result = self.action()
        if result is not None:
            await result
