"""Text sparklines (▁▂▃▄▅▆▇█) for table cells, and a bounded history to draw them from."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

BARS = "▁▂▃▄▅▆▇█"


def spark(values: Sequence[float | None], width: int = 12) -> str:
    """The last `width` values as bars scaled to their own maximum (blank for unknown)."""
    tail = list(values)[-width:]
    known = [v for v in tail if v is not None]
    top = max(known, default=0.0)
    if top <= 0:
        return "".join(" " if v is None else BARS[0] for v in tail)
    return "".join(" " if v is None else BARS[min(int(v / top * (len(BARS) - 1) + 0.5),
                                                  len(BARS) - 1)] for v in tail)


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
