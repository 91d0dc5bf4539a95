"""Per group and per topic figures, the previous period's trend figures, worst hours, the
hour-of-day heat map and the lag timeline, computed for each group at once from its cycles.

How this works: Spark sums the queue rows into cycles (dataset.cycles, one shuffle) and hands
each group's cycles, both periods', to `for_group` as Arrow arrays (a grouped aggregate
Arrow UDF: the work is distributed by group, a group being thousands of small rows).
`for_group` computes every figure with numpy and returns one JSON document per group; the
driver collects the documents in one Spark job.  Percentiles are exact nearest-rank
values (the value at rank ceil(p * n) of the sorted samples).  A cycle breaches its group's
SLO when its time lag is above the threshold; each breaching cycle counts its sampling
interval (``interval_ms``), so missing cycles and gaps never add breach time.  Cycles whose
time lag is unknown count as samples but not in the time percentiles, nor as breaches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

QUANTILES = (0.5, 0.95, 0.99)
WORST_HOURS = 3
HOUR_MS = 3_600_000
#: The columns of the cycles `for_group` reads (``t``: epoch milliseconds).
CYCLE_COLUMNS = ("cluster", "group", "topic", "t", "lag", "lag_ms", "interval_ms", "risk",
                 "risk_messages", "gap", "lagging", "in_flight")

Row = dict[str, Any]
Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class Spec:
    """What `for_group` needs besides the cycles: the periods (epoch ms, ``[start, end)``),
    the SLOs and the timeline's bucket."""

    start_ms: int
    end_ms: int
    previous_start_ms: int
    previous_end_ms: int
    slo_default_ms: int
    slo_groups: Mapping[str, int]
    bucket_ms: int


@dataclass(frozen=True, slots=True)
class Series:
    """Cycles of one series sorted by time: lag, time lag (``timed`` says which are known),
    interval, retention risk, the messages at risk, and of the lag the messages in flight
    (POP: taken by a consumer, not acked yet)."""

    t: Array
    lag: Array
    lag_ms: Array
    timed: Array
    interval: Array
    risk: Array
    risk_messages: Array
    in_flight: Array

    def take(self, mask: Array) -> Series:
        return Series(*(getattr(self, f)[mask] for f in self.__slots__))


def _int(value: Any) -> int:
    return int(value)


def nearest_rank(sorted_values: Array, p: float) -> int | None:
    """The value at rank ceil(p * n) of `sorted_values`; None when empty."""
    n = len(sorted_values)
    if not n:
        return None
    return _int(sorted_values[max(1, math.ceil(p * n)) - 1])


def _max(values: Array) -> int | None:
    return _int(values.max()) if len(values) else None


def breach_ms(s: Series, slo_ms: int) -> int:
    return _int(s.interval[s.timed & (s.lag_ms > slo_ms)].sum())


def series_figures(s: Series, slo_ms: int) -> Row:
    """Samples, covered time, percentiles and max of lag (messages, ms), the most messages
    in flight at once, breach time above the SLO and time at retention risk of one series."""
    lags = np.sort(s.lag)
    times = np.sort(s.lag_ms[s.timed])
    out: Row = {"samples": len(s.t), "covered_ms": _int(s.interval.sum()),
                "timed_samples": len(times)}
    for p, name in zip(QUANTILES, ("p50", "p95", "p99"), strict=True):
        out[f"lag_{name}"] = nearest_rank(lags, p)
        out[f"lag_ms_{name}"] = nearest_rank(times, p)
    out |= {"lag_max": _max(lags), "lag_ms_max": _max(times),
            "in_flight_max": _max(s.in_flight),
            "breach_ms": breach_ms(s, slo_ms),
            "risk_ms": _int(s.interval[s.risk > 0].sum()),
            "risk_messages_max": _max(s.risk_messages), "slo_ms": slo_ms}
    return out


def _column(cols: Mapping[str, Any], name: str) -> tuple[Array, Array]:
    col = cols[name]
    return col.fill_null(0).to_numpy(), col.is_valid().to_numpy(zero_copy_only=False)


def _sum_by_time(t: Array, values: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
    """`values` reduced per distinct `t` (sorted): lag, risk_messages, in_flight summed, the
    others at
    their maximum (``timed``: any known)."""
    order = np.argsort(t, kind="stable")
    t = t[order]
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]]) if len(t) else np.array([], int)
    out: dict[str, Array] = {}
    for name, v in values.items():
        v = v[order]
        if not len(t):
            out[name] = v
        elif name in ("lag", "risk_messages", "in_flight"):
            out[name] = np.add.reduceat(v, starts)
        elif name == "timed":
            out[name] = np.logical_or.reduceat(v, starts)
        else:
            out[name] = np.maximum.reduceat(v, starts)
    return t[starts], out


def _series(t: Array, v: dict[str, Array]) -> Series:
    return Series(t, v["lag"], v["lag_ms"], v["timed"], v["interval"], v["risk"],
                  v["risk_messages"], v["in_flight"])


def worst_hours(s: Series, slo_ms: int, top: int = WORST_HOURS) -> list[Row]:
    """The `top` hours (UTC) by breach time then by worst time lag, only hours with any
    breach or lag; ``rank`` 1 is the worst."""
    hours = s.t - s.t % HOUR_MS
    rows: list[Row] = []
    breach = s.timed & (s.lag_ms > slo_ms)
    for hour in np.unique(hours):
        m = hours == hour
        times = s.lag_ms[m & s.timed]
        row: Row = {"hour": _int(hour), "breach_ms": _int(s.interval[m & breach].sum()),
               "lag_ms_max": _max(times), "lag_max": _int(s.lag[m].max())}
        if row["breach_ms"] > 0 or row["lag_max"] > 0:
            rows.append(row)
    rows.sort(key=lambda r: (-r["breach_ms"], r["lag_ms_max"] is None,
                             -(r["lag_ms_max"] or 0), -r["lag_max"], r["hour"]))
    return [{**r, "rank": i + 1} for i, r in enumerate(rows[:top])]


def heatmap(s: Series, slo_ms: int) -> list[Row]:
    """Per hour of day (UTC) with samples: the p95 time lag (ms) and the breach time."""
    hour_of_day = (s.t // HOUR_MS) % 24
    breach = s.timed & (s.lag_ms > slo_ms)
    return [{"hour_of_day": _int(h),
             "lag_ms_p95": nearest_rank(np.sort(s.lag_ms[(hour_of_day == h) & s.timed]), 0.95),
             "breach_ms": _int(s.interval[(hour_of_day == h) & breach].sum())}
            for h in np.unique(hour_of_day)]


def timeline(s: Series, bucket_ms: int) -> list[list[int | None]]:
    """[bucket, worst time lag, worst lag] per `bucket_ms` bucket with samples."""
    buckets = s.t // bucket_ms * bucket_ms
    out: list[list[int | None]] = []
    for b in np.unique(buckets):
        m = buckets == b
        out.append([_int(b), _max(s.lag_ms[m & s.timed]), _int(s.lag[m].max())])
    return out


def for_group(table: Mapping[str, Any], spec: Spec) -> Row:
    """Every figure of one group from its cycles (`CYCLE_COLUMNS` as Arrow arrays, both
    periods, gap rows included): ``group`` (None when the period has neither samples nor
    gaps), ``topics``, ``previous`` (None without samples then), ``hours``, ``heat``,
    ``timeline``, ``lagging`` (a queue lagged in the period) and ``at_risk``."""
    t = table["t"].to_numpy()
    gap = table["gap"].fill_null(0).to_numpy() > 0
    lag_ms, timed = _column(table, "lag_ms")
    values = {"lag": _column(table, "lag")[0], "lag_ms": lag_ms, "timed": timed,
              "interval": _column(table, "interval_ms")[0], "risk": _column(table, "risk")[0],
              "risk_messages": _column(table, "risk_messages")[0],
              "in_flight": _column(table, "in_flight")[0]}
    lagging = _column(table, "lagging")[0] > 0
    topics = table["topic"].fill_null("").dictionary_encode()
    topic = topics.indices.to_numpy()
    group = table["group"][0].as_py()
    slo_ms = spec.slo_groups.get(group, spec.slo_default_ms)
    now = (t >= spec.start_ms) & (t < spec.end_ms)
    before = (t >= spec.previous_start_ms) & (t < spec.previous_end_ms)
    doc: Row = {"group": None, "topics": [], "previous": None, "hours": [], "heat": [],
                "timeline": [], "lagging": bool((lagging & now & ~gap).any()),
                "at_risk": False}

    def cycles(mask: Array) -> Series:
        return _series(*_sum_by_time(t[mask], {k: v[mask] for k, v in values.items()}))

    sampled = now & ~gap
    gaps = now & gap
    if sampled.any() or gaps.any():
        s = cycles(sampled)
        row = series_figures(s, slo_ms)
        if not len(s.t):
            row |= {k: None for k in row if k not in ("samples", "covered_ms", "timed_samples",
                                                      "breach_ms", "risk_ms")}
        row |= {"gap_cycles": _int(gaps.sum()),
                "gap_ms": _int(values["interval"][gaps].sum()),
                "coverage": min(1.0, row["covered_ms"] / (spec.end_ms - spec.start_ms))}
        doc["group"] = row
        doc["at_risk"] = bool((s.risk > 0).any())
        names = topics.dictionary.to_pylist()
        for i in sorted(set(topic[sampled].tolist()), key=lambda i: names[i]):
            doc["topics"].append({"topic": names[i], **series_figures(
                cycles(sampled & (topic == i)), slo_ms)})
        doc["hours"] = worst_hours(s, slo_ms)
        doc["heat"] = heatmap(s, slo_ms)
        doc["timeline"] = timeline(s, spec.bucket_ms)
    p = cycles(before & ~gap)
    if len(p.t):
        doc["previous"] = {"samples": len(p.t),
                           "lag_ms_p95": nearest_rank(np.sort(p.lag_ms[p.timed]), 0.95),
                           "breach_ms": breach_ms(p, slo_ms)}
    return doc


def per_group(cycles: DataFrame, spec: Spec) -> DataFrame:
    """One row per (cluster, group) of `cycles` with ``doc``, `for_group`'s JSON (a grouped
    aggregate Arrow UDF: each group's cycles arrive as Arrow arrays, no pandas needed)."""
    import warnings

    from pyspark.sql.pandas.functions import arrow_udf
    from pyspark.util import PythonEvalType

    def run(*arrays: Any) -> str:
        doc = for_group(dict(zip(CYCLE_COLUMNS, arrays, strict=True)), spec)
        return json.dumps(doc, separators=(",", ":"))

    with warnings.catch_warnings():  # "prefer type hints": the type is given explicitly
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(run, "string",  # type: ignore[call-overload]
                        PythonEvalType.SQL_GROUPED_AGG_ARROW_UDF)
    cols = [F.unix_millis("ts").alias("t") if c == "t" else F.col(c) for c in CYCLE_COLUMNS]
    # Spark sorts the cycles by the grouping keys for the UDF: a leading hash of the names
    # gives its prefix sort a long to compare (the names alone start alike: one cluster).
    return cycles.groupBy(F.xxhash64("cluster", "group").alias("_key"), "cluster", "group") \
        .agg(udf(*cols).alias("doc")).drop("_key")


Rows = dict[str, list[Row]]


def split(docs: list[Row]) -> Rows:
    """The collected per-group documents as summary.build's row lists: ``groups``,
    ``topics``, ``previous``, ``hours``, ``heat``, plus ``timeline`` and the ``lagging``
    and ``at_risk`` groups (rows of cluster and group)."""
    out: Rows = {k: [] for k in ("groups", "topics", "previous", "hours", "heat",
                                 "timeline", "lagging", "at_risk")}
    for r in docs:
        key = {"cluster": r["cluster"], "group": r["group"]}
        doc = json.loads(r["doc"])
        if doc["group"] is not None:
            out["groups"].append({**key, **doc["group"]})
        out["topics"] += [{**key, **t} for t in doc["topics"]]
        if doc["previous"] is not None:
            out["previous"].append({**key, **doc["previous"]})
        out["hours"] += [{**key, **h} for h in doc["hours"]]
        out["heat"] += [{**key, **h} for h in doc["heat"]]
        out["timeline"] += [{**key, "bucket": b, "lag_ms": ms, "lag": lag}
                            for b, ms, lag in doc["timeline"]]
        for flag in ("lagging", "at_risk"):
            if doc[flag]:
                out[flag].append(key)
    return out
