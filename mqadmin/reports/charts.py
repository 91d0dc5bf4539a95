"""The report's charts as PNG (matplotlib, no display): lag over time of the top
offenders, the hour-of-day x group heat map, and SLO minutes per group."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HEAT_GROUPS = 30
BAR_GROUPS = 20
DPI = 110
#: Colour-bar ticks of the heat map, in minutes (1 s ... 1 d).
_NICE_MINUTES = (1 / 60, 5 / 60, 15 / 60, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 720, 1440)
_UNITS = ((3_600_000, "h"), (60_000, "min"), (1000, "s"), (1, "ms"))


def _unit(max_ms: float) -> tuple[float, str]:
    """The largest unit in which `max_ms` is at least 1 (for readable axes)."""
    for scale, name in _UNITS:
        if max_ms >= scale:
            return float(scale), name
    return 1.0, "ms"


def duration(ms: float | None) -> str:
    """``4 min 10 s``-style text for labels."""
    if ms is None:
        return "n/a"
    s = ms / 1000
    if s < 60:
        return f"{s:.3g} s"
    if s < 3600:
        return f"{int(s // 60)} min" + (f" {int(s % 60)} s" if int(s % 60) else "")
    if s < 86_400:
        return f"{int(s // 3600)} h" + (f" {int(s % 3600 // 60)} min" if s % 3600 >= 60 else "")
    return f"{int(s // 86_400)} d {int(s % 86_400 // 3600)} h"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 11, "axes.titleweight": "bold",
                         "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": DPI})
    return plt


def _name(row: Mapping[str, Any], clusters: int) -> str:
    return f"{row['cluster']}/{row['group']}" if clusters > 1 else str(row["group"])


def lag_over_time(doc: Mapping[str, Any], timeline: Sequence[Mapping[str, Any]],
                  path: Path) -> Path:
    """Worst time lag per time bucket for the charted groups, with their SLO lines."""
    plt = _plt()
    import matplotlib.dates as mdates

    slo = {(g["cluster"], g["group"]): g["slo_ms"] for g in doc["groups"]}
    clusters = len({g["cluster"] for g in doc["groups"]})
    series: dict[tuple[str, str], list[tuple[dt.datetime, float]]] = defaultdict(list)
    for r in sorted(timeline, key=lambda r: r["bucket"]):
        if r["lag_ms"] is not None:
            when = dt.datetime.fromtimestamp(r["bucket"] / 1000, dt.UTC)
            series[(r["cluster"], r["group"])].append((when, float(r["lag_ms"])))
    rank = {(t["cluster"], t["group"]): i for i, t in enumerate(doc["top_offenders"])}
    series = dict(sorted(series.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    peak = max([v for s in series.values() for _, v in s] + [1.0])
    scale, unit = _unit(peak)
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for i, (key, points) in enumerate(series.items()):
        color = f"C{i}"
        label = _name({"cluster": key[0], "group": key[1]}, clusters)
        ax.plot([p[0] for p in points], [p[1] / scale for p in points], color=color,
                lw=1.4, label=f"{label} (SLO {duration(slo.get(key))})")
        if slo.get(key) is not None and slo[key] <= peak * 1.2:
            ax.axhline(slo[key] / scale, color=color, lw=0.9, ls="--", alpha=0.7)
    if not series:
        ax.text(0.5, 0.5, "no time lag recorded", ha="center", va="center",
                transform=ax.transAxes)
    period = doc["period"]
    ax.set_title(f"Time lag of the worst groups, {period['label']} (dashed: their SLO)")
    ax.set_ylabel(f"time lag ({unit}, worst queue)")
    ax.set_xlabel("time (UTC)")
    ax.set_ylim(bottom=0)
    first = min((p[0] for s in series.values() for p in s), default=_utc(period["start"]))
    # From the first sample (a history that starts late would squeeze into the right edge).
    ax.set_xlim(max(_utc(period["start"]), first), _utc(period["end"]))
    locator = mdates.AutoDateLocator(tz=dt.UTC)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(locator, tz=dt.UTC))  # type: ignore[no-untyped-call]
    if series:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(3, len(series)),
                  fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _ranked(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return sorted(doc["groups"], key=lambda g: (-g["breach_ms"], -(g["lag_ms_p95"] or 0),
                                                g["group"]))


def heatmap(doc: Mapping[str, Any], path: Path) -> Path:
    """p95 time lag per hour of day (UTC) for the worst groups, in minutes."""
    plt = _plt()
    import numpy as np
    from matplotlib.colors import LogNorm

    clusters = len({g["cluster"] for g in doc["groups"]})
    rows = {(r["cluster"], r["group"]): r["lag_ms_p95"] for r in doc["heatmap"]["rows"]}
    chosen = [g for g in _ranked(doc) if (g["cluster"], g["group"]) in rows][:HEAT_GROUPS]
    data = np.array([[np.nan if v is None else v / 60_000
                      for v in rows[(g["cluster"], g["group"])]] for g in chosen] or
                    [[np.nan] * 24], dtype=float)
    positive = data[np.isfinite(data) & (data > 0)]
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.26 * max(len(chosen), 1)))
    cmap = plt.get_cmap("YlOrRd").with_extremes(bad="#eeeeee")
    shown = np.where(data > 0, data, np.nan)
    if positive.size:
        lo, hi = float(max(positive.min(), 1 / 60)), float(max(positive.max(), 1 / 30))
        norm = LogNorm(vmin=lo, vmax=hi)
        image = ax.imshow(shown, aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
        bar = fig.colorbar(image, ax=ax, pad=0.01)
        ticks = [lo]
        for t in (*(t for t in _NICE_MINUTES if lo * 2 <= t <= hi / 2), hi):
            if t >= ticks[-1] * 2 or t == hi:
                ticks.append(t)
        bar.set_ticks(ticks, labels=[duration(t * 60_000) for t in ticks])
        bar.minorticks_off()
        bar.set_label("p95 time lag (log scale)")
    else:
        ax.imshow(shown, aspect="auto", cmap=cmap, interpolation="nearest")
    ax.set_yticks(range(len(chosen)), [_name(g, clusters) for g in chosen] or [""])
    ax.set_xticks(range(24), [f"{h:02d}" for h in range(24)])
    ax.set_xlabel("hour of day (UTC); grey: no lag or no samples")
    ax.set_ylabel("consumer group")
    ax.grid(False)
    more = len(rows) - len(chosen)
    ax.set_title(f"p95 time lag by hour of day, {doc['period']['label']}"
                 + (f" ({len(chosen)} worst groups of {len(rows)})" if more > 0 else ""))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def slo_minutes(doc: Mapping[str, Any], path: Path) -> Path:
    """Minutes above SLO per group (the worst BAR_GROUPS), each bar labelled."""
    plt = _plt()
    clusters = len({g["cluster"] for g in doc["groups"]})
    chosen = [g for g in _ranked(doc) if g["breach_ms"] > 0][:BAR_GROUPS]
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.3 * max(len(chosen), 2)))
    names = [f"{_name(g, clusters)} (SLO {duration(g['slo_ms'])})" for g in chosen]
    values = [g["slo_minutes"] for g in chosen]
    bars = ax.barh(range(len(chosen)), values, color="#d9534f")
    ax.bar_label(bars, labels=[f"{v:,.1f} min" for v in values], padding=3, fontsize=8)
    ax.set_yticks(range(len(chosen)), names)
    ax.invert_yaxis()
    ax.set_xlabel("minutes above the group's time-lag SLO")
    period_min = (_utc(doc["period"]["end"]) - _utc(doc["period"]["start"])).total_seconds() / 60
    ax.set_xlim(0, max([*values, 1.0]) * 1.15)
    if not chosen:
        ax.text(0.5, 0.5, "no group breached its SLO", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_title(f"Minutes above SLO, {doc['period']['label']} "
                 f"(period: {period_min:,.0f} min)")
    ax.grid(axis="y", visible=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def draw_all(doc: Mapping[str, Any], timeline: Sequence[Mapping[str, Any]],
             out: Path) -> list[Path]:
    """The three charts into `out`."""
    return [lag_over_time(doc, timeline, out / "lag_over_time.png"),
            heatmap(doc, out / "heatmap.png"),
            slo_minutes(doc, out / "slo_minutes.png")]
