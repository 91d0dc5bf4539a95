"""Send latency fault tolerance: brokers that answered slowly or failed are avoided for a while.

How this works (client-behaviour.md §2.3, 4.9.7 `MQFaultStrategy`/`LatencyFaultToleranceImpl`):
after every send attempt the producer reports the broker's latency; an attempt that raised
counts as 30 000 ms ("isolation").  The ban is the `not_available_duration` entry of the
largest `latency_max` entry the latency reaches, so with 4.9.7's tables a failure bans the
broker for 600 s and an answer under 550 ms bans nothing.  When every broker is banned the
"least bad" one is picked: available first, then lower latency, then the earlier end of ban,
taking item `counter % (n/2)` of that order so the better half shares the load.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

LATENCY_MAX_4_9_7 = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_4_9_7 = (0, 0, 30000, 60000, 120000, 180000, 600000)
LATENCY_MAX_5 = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_5 = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS = 30000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency and when its ban ends (ms)."""

    name: str
    current_latency: int
    start_timestamp: int

    def is_available(self, now: int) -> bool:
        return now >= self.start_timestamp

    def sort_key(self, now: int) -> tuple[bool, int, int]:
        return (not self.is_available(now), self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    """The fault table and the selection helpers over it."""

    def __init__(self, *, enabled: bool = False,
                 latency_max: Sequence[int] = LATENCY_MAX_4_9_7,
                 not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION_4_9_7,
                 clock: Callable[[], int] = now_ms) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration differ in length")
        self.enabled = enabled
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._worst = itertools.count(random.getrandbits(16))

    def not_available_duration_for(self, latency: int) -> int:
        """`computeNotAvailableDuration`: the entry of the largest latency_max <= latency."""
        for bound, duration in zip(reversed(self.latency_max),
                                   reversed(self.not_available_duration), strict=True):
            if latency >= bound:
                return duration
        return 0

    def update(self, broker: str, latency: int, isolation: bool) -> None:
        """`updateFaultItem` after an attempt; does nothing when fault tolerance is off."""
        if not self.enabled:
            return
        duration = self.not_available_duration_for(ISOLATION_LATENCY_MS if isolation
                                                   else latency)
        start = self.clock() + duration
        item = self.items.get(broker)
        if item is None:
            self.items[broker] = FaultItem(broker, latency, start)
        else:
            item.current_latency = latency
            item.start_timestamp = start

    def is_available(self, broker: str) -> bool:
        item = self.items.get(broker)
        return item is None or item.is_available(self.clock())

    def remove(self, broker: str) -> None:
        self.items.pop(broker, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker of the table, rotating over the better half."""
        if not self.items:
            return None
        now = self.clock()
        ordered = sorted(self.items.values(), key=lambda item: item.sort_key(now))
        half = len(ordered) // 2
        if half <= 0:
            return ordered[0].name
        return ordered[next(self._worst) % half].name
