"""Sparklines (▁▂▃▄▅▆▇█): the one way a series is drawn in a text cell, by `lag status`,
`lag watch` and the dashboard."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int | None = 12,
              floor: float = 0) -> str:
    """One bar per value, the last `width` of them (all when None), scaled from 0 to the
    largest (at least `floor`, so a lag of one or two messages does not look like a storm)
    to the nearest bar; blank for an unknown value."""
    tail = list(values)[-width:] if width else list(values)
    top = max(max((v for v in tail if v is not None), default=0), floor)
    if top <= 0:
        return "".join(" " if v is None else BARS[0] for v in tail)
    last = len(BARS) - 1
    return "".join(" " if v is None else BARS[min(max(int(v / top * last + 0.5), 0), last)]
                   for v in tail)
