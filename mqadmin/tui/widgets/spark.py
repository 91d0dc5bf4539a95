"""Sparklines in the dashboard's table cells (mqadmin.sparkline's, the CLI's too), and a
bounded history to draw them from."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from mqadmin.sparkline import sparkline as spark

__all__ = ["History", "spark"]


class History:
    """The last `size` values of each key (a broker's TPS, a group's lag)."""

    def __init__(self, size: int = 30) -> None:
        self.size = size
        self._values: dict[str, deque[float | None]] = {}

    def add(self, key: str, value: float | None) -> None:
        self._values.setdefault(key, deque(maxlen=self.size)).append(value)

    def get(self, key: str) -> list[float | None]:
        return list(self._values.get(key, ()))

    def keep(self, keys: Iterable[str]) -> None:
        """Forget keys no longer shown."""
        wanted = set(keys)
        for key in list(self._values):
            if key not in wanted:
                del self._values[key]
