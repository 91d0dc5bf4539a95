"""A clock tests move by hand, for code that takes `clock: Callable[[], int]` (ms)."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
