"""An independent plain-Python computation of the report's figures, to check the Spark job
against: same definitions (nearest-rank percentiles, interval-weighted breach time), none of
the job's code.  The verdicts are the lag contract's rules in Python (`contract.judge`, the
monitor's), applied as the history allows: a commit is a cycle in which any queue of the
group moved, and the no-commit rule spans the group's last N cycles (test_rules.py holds
the rules themselves to one table)."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mqadmin.reports import contract
from mqadmin.reports.contract import SEVERITY, Status

Row = dict[str, Any]
#: The verdicts the report shows time for, and those that form episodes.
TIMED = (Status.WARNING, Status.STALL, Status.REWIND, Status.STOP)


def nearest_rank(values: Iterable[int], p: float) -> int | None:
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p * len(ordered))) - 1]


def cycles(rows: Iterable[Row], key: Callable[[Row], tuple[Any, ...]]) -> dict[tuple[Any, ...],
                                                                                  Row]:
    """Sampled cycles per key + (ts,): lag summed, worst time lag, interval, risk."""
    out: dict[tuple[Any, ...], Row] = {}
    for r in rows:
        if not r["ok"]:
            continue
        k = (*key(r), r["ts"])
        c = out.setdefault(k, {"lag": 0, "lag_ms": None, "interval_ms": 0, "risk": False,
                               "risk_messages": 0})
        c["lag"] += r["lag"]
        if r["lag_ms"] is not None:
            c["lag_ms"] = r["lag_ms"] if c["lag_ms"] is None else max(c["lag_ms"], r["lag_ms"])
        c["interval_ms"] = max(c["interval_ms"], r["interval_ms"])
        if r["retention_risk"]:
            c["risk"] = True
            c["risk_messages"] += r["risk_messages"]
    return out


def figures(series: list[Row], slo_ms: int) -> Row:
    """The figures of one series of cycles."""
    lags = [c["lag"] for c in series]
    times = [c["lag_ms"] for c in series if c["lag_ms"] is not None]
    out: Row = {"samples": len(series), "timed_samples": len(times), "slo_ms": slo_ms}
    for p, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        out[f"lag_{name}"] = nearest_rank(lags, p)
        out[f"lag_ms_{name}"] = nearest_rank(times, p)
    out["lag_max"] = max(lags, default=None)
    out["lag_ms_max"] = max(times, default=None)
    out["breach_ms"] = sum(c["interval_ms"] for c in series
                           if c["lag_ms"] is not None and c["lag_ms"] > slo_ms)
    out["risk_ms"] = sum(c["interval_ms"] for c in series if c["risk"])
    out["risk_messages_max"] = max((c["risk_messages"] for c in series), default=None)
    out["covered_ms"] = sum(c["interval_ms"] for c in series)
    return out


def hour_ms(ts: int) -> int:
    return ts - ts % 3_600_000


@dataclass(frozen=True, slots=True)
class Point:
    """A history row as the rules read it (its commit time: the group's last commit)."""

    ts: int
    lag: int
    consumer_offset: int
    commit_ts: int
    in_flight: int = 0  # the generated histories have no POP groups


def group_severities(rows: list[Row], window: int) -> tuple[dict[tuple[str, str, int], int],
                                                             dict[tuple[str, str, int], set[str]]]:
    """Per (cluster, group, ts): the group's verdict (its worst queue's, each judged on its
    last `window` samples with the commits of the group's last `window` cycles) as a
    severity, and the topics of its queues in an ERROR verdict."""
    ok = sorted((r for r in rows if r["ok"]), key=lambda r: r["ts"])
    by_group: dict[tuple[str, str], dict[int, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        by_group[(r["cluster"], r["group"])][r["ts"]].append(r)
    severity: dict[tuple[str, str, int], int] = {}
    topics: dict[tuple[str, str, int], set[str]] = {}
    for key, cycles in by_group.items():
        series: dict[tuple[Any, ...], list[Point]] = defaultdict(list)
        commits: list[int] = []
        for ts in sorted(cycles):
            queues = [(r["topic"], r["broker"], r["queue_id"], r) for r in cycles[ts]]
            moved = any(not series[q[:3]] or series[q[:3]][-1].consumer_offset
                        != q[3]["consumer_offset"] or series[q[:3]][-1].in_flight
                        != (q[3].get("in_flight") or 0) for q in queues)
            commits.append(ts if moved else commits[-1])
            found = []
            for topic, broker, queue_id, r in queues:
                points = series[(topic, broker, queue_id)]
                points.append(Point(ts, r["lag"], r["consumer_offset"], commits[-1],
                                    r.get("in_flight") or 0))
                found.append((topic, contract.judge(points[-window:], 0,
                                                    commits[-window:]).status))
            severity[(*key, ts)] = max(SEVERITY[status] for _, status in found)
            topics[(*key, ts)] = {t for t, status in found if status in contract.ERRORS}
    return severity, topics


def islands(points: list[tuple[int, int, Any]]) -> list[list[tuple[int, int, Any]]]:
    """Runs of equal state over (ts, interval_ms, state) sorted by ts, broken by a state
    change or a jump of more than 1.5 intervals."""
    runs: list[list[tuple[int, int, Any]]] = []
    for p in points:
        if runs and runs[-1][-1][2] == p[2] and p[0] - runs[-1][-1][0] <= p[1] * 1.5:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def report(rows: list[Row], start: int, end: int, slo: Callable[[str], int],
           window: int = 10, context_ms: int = 3_600_000) -> dict[tuple[str, str], Row]:
    """Per (cluster, group): the figures, gaps, coverage, worst hours, heat map row, state
    times, episodes, risk episodes and the previous period's figures."""
    cur = [r for r in rows if start <= r["ts"] < end]
    prev = [r for r in rows if start - (end - start) <= r["ts"] < start]
    g_cycles = cycles(cur, lambda r: (r["cluster"], r["group"]))
    t_cycles = cycles(cur, lambda r: (r["cluster"], r["group"], r["topic"]))
    p_cycles = cycles(prev, lambda r: (r["cluster"], r["group"]))
    gaps: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for r in cur:
        if not r["ok"]:
            gaps[(r["cluster"], r["group"])][r["ts"]] = r["interval_ms"]
    g_sev, g_topics = group_severities(
        [r for r in rows if start - context_ms <= r["ts"] < end], window)
    out: dict[tuple[str, str], Row] = {}
    keys = {k[:2] for k in g_cycles} | set(gaps)
    for key in keys:
        series = sorted(((k[2], c) for k, c in g_cycles.items() if k[:2] == key))
        cs = [c for _, c in series]
        g = figures(cs, slo(key[1]))
        g["gap_cycles"] = len(gaps.get(key, {}))
        g["gap_ms"] = sum(gaps.get(key, {}).values())
        g["coverage"] = round(min(1.0, g["covered_ms"] / (end - start)), 4)
        hours: dict[int, list[Row]] = defaultdict(list)
        hod: dict[int, list[int]] = defaultdict(list)
        for ts, c in series:
            c["slo_ms"] = g["slo_ms"]
            hours[hour_ms(ts)].append(c)
            if c["lag_ms"] is not None:
                hod[(ts // 3_600_000) % 24].append(c["lag_ms"])
        ranked = []
        for h, hcs in hours.items():
            f = figures(hcs, g["slo_ms"])
            if f["breach_ms"] > 0 or f["lag_max"] > 0:
                ranked.append((-f["breach_ms"], -(f["lag_ms_max"] if f["lag_ms_max"] is not None
                                                  else -1), -f["lag_max"], h, f))
        g["worst_hours"] = [{"hour": utc(h), "slo_minutes": round(f["breach_ms"] / 60_000, 3),
                             "lag_ms_max": f["lag_ms_max"], "lag_max": f["lag_max"]}
                            for *_, h, f in sorted(ranked, key=lambda x: x[:4])[:3]]
        g["heat"] = [nearest_rank(hod[h], 0.95) for h in range(24)]
        states = [(ts, c["interval_ms"], g_sev[(*key, ts)], c) for ts, c in series]
        g["state_ms"] = {status.value: sum(i for _, i, s, _c in states if s == SEVERITY[status])
                         for status in TIMED}
        episodes = []
        for run in islands([(ts, i, s) for ts, i, s, _c in states]):
            if run[0][2] >= SEVERITY[Status.STALL]:
                ts_list = [p[0] for p in run]
                cs_run = [g_cycles[(*key, t)] for t in ts_list]
                episodes.append({
                    "state": list(Status)[run[0][2]].value,
                    "start": utc(run[0][0]), "end": utc(run[-1][0] + run[-1][1]),
                    "minutes": round(sum(p[1] for p in run) / 60_000, 3), "cycles": len(run),
                    "lag_max": max(c["lag"] for c in cs_run),
                    "lag_ms_max": max((c["lag_ms"] for c in cs_run if c["lag_ms"] is not None),
                                      default=None),
                    "topics": sorted(set().union(*(g_topics[(*key, t)] for t in ts_list)))})
        g["episodes"] = episodes
        risks = []
        for run in islands([(ts, c["interval_ms"], c["risk"]) for ts, c in series]):
            if run[0][2]:
                cs_run = [g_cycles[(*key, p[0])] for p in run]
                risks.append({"start": utc(run[0][0]), "end": utc(run[-1][0] + run[-1][1]),
                              "minutes": round(sum(p[1] for p in run) / 60_000, 3),
                              "cycles": len(run),
                              "risk_messages_max": max(c["risk_messages"] for c in cs_run)})
        g["risk_episodes"] = risks
        g["topics"] = {k[2]: figures([c for kk, c in sorted(t_cycles.items())
                                      if kk[:3] == k], g["slo_ms"])
                       for k in {kk[:3] for kk in t_cycles if kk[:2] == key}}
        pcs = [c for k, c in sorted(p_cycles.items()) if k[:2] == key]
        g["previous"] = figures(pcs, g["slo_ms"]) if pcs else None
        out[key] = g
    return out
