"""The client instance's background duties as small Services with a first delay and a period."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.common.service import Service


class Periodic(Service):
    """Runs `action` after `first_delay` seconds, then every `period` seconds, or at once
    when `wakeup()` is called (a rebalance notification, a newly learned broker)."""

    def __init__(self, name: str, period: float, action: Callable[[], Awaitable[None]],
                 first_delay: float | None = None) -> None:
        super().__init__(period if first_delay is None else first_delay)
        self.name = name
        self.period = period
        self.first_delay = self.interval
        self.action = action

    def start(self) -> None:
        self.interval = self.first_delay
        super().start()

    async def run_once(self) -> None:
        self.interval = self.period
        await self.action()
