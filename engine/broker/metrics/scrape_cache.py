"""`ScrapeCache`: what a scrape derived from a key (a series' label dicts, a message's store
time), cached for the next scrape and dropped once a scrape no longer asks for it.

How this works: a scrape asks `get(key)` for every series it writes; a key the previous scrape
asked for is answered from what it made then, any other is made now.  `end_scrape()` ends a
scrape: what this one asked for is kept, the rest (a deleted topic, a group whose offsets are
gone) is dropped, so the cache never holds more than two scrapes' worth.  Label dicts can be
shared this way because prometheus_client's samples and writer only read them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ScrapeCache(Generic[K, V]):
    """Values made from keys by `make`, reused from one scrape to the next."""

    def __init__(self, make: Callable[[K], V]) -> None:
        self.make = make
        self._last: dict[K, V] = {}
        self._now: dict[K, V] = {}

    def get(self, key: K) -> V:
        value = self._now.get(key)
        if value is None:
            value = self._last.get(key)
            if value is None:
                value = self.make(key)
            self._now[key] = value
        return value

    def end_scrape(self) -> None:
        """End of a scrape: keep what it used, forget the rest."""
        self._last, self._now = self._now, {}

    def __len__(self) -> int:
        return len(self._last)
