"""An independent plain-Python computation of the report's figures, to check the Spark job
against: same definitions (nearest-rank percentiles, interval-weighted breach time, the
verdict rules), none of the job's code."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

Row = dict[str, Any]
SEV = {"OK": 0, "WARNING": 1, "STALL": 2, "REWIND": 3, "STOP": 4}


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


def queue_severities(rows: list[Row], window: int) -> dict[tuple[Any, ...], tuple[int, bool]]:
    """Per (cluster, group, topic, broker, queue_id, ts): the queue's verdict by every rule
    but STOP, and whether its offset moved (or it is the queue's first sample)."""
    ok = sorted((r for r in rows if r["ok"]), key=lambda r: r["ts"])
    series: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in ok:
        series[(r["cluster"], r["group"], r["topic"], r["broker"], r["queue_id"])].append(r)
    out = {}
    for key, s in series.items():
        for i, r in enumerate(s):
            lo = max(0, i - window + 1)
            win = s[lo:i + 1]
            offsets = [w["consumer_offset"] for w in win]
            sev = 0
            if r["lag"] > 0:
                decreased = any(s[j]["lag"] < s[j - 1]["lag"] for j in range(max(1, lo + 1), i + 1))
                never_fell = min(w["lag"] for w in win) > 0
                if r["consumer_offset"] < max(offsets):
                    sev = SEV["REWIND"]
                elif never_fell and len(win) >= 2 and min(offsets) == max(offsets):
                    sev = SEV["STALL"]
                elif never_fell and len(win) >= 2 and not decreased:
                    sev = SEV["WARNING"]
            moved = i == 0 or r["consumer_offset"] != s[i - 1]["consumer_offset"]
            out[(*key, r["ts"])] = (sev, moved)
    return out


def group_severities(rows: list[Row], window: int) -> tuple[dict[tuple[str, str, int], int],
                                                             dict[tuple[str, str, int], set[str]]]:
    """Per (cluster, group, ts): the group's verdict (STOP on the group's commit times over
    its last `window` cycles, else its worst queue) and the topics in that ERROR state."""
    queues = queue_severities(rows, window)
    lag = {(r["cluster"], r["group"], r["topic"], r["broker"], r["queue_id"], r["ts"]): r["lag"]
           for r in rows if r["ok"]}
    cycles: dict[tuple[str, str], dict[int, list[tuple[str, int, bool, int]]]] = \
        defaultdict(lambda: defaultdict(list))
    for (cluster, group, topic, _b, _q, ts), (sev, moved) in queues.items():
        cycles[(cluster, group)][ts].append((topic, sev, moved,
                                             lag[(cluster, group, topic, _b, _q, ts)]))
    severity: dict[tuple[str, str, int], int] = {}
    topics: dict[tuple[str, str, int], set[str]] = {}
    for key, by_ts in cycles.items():
        commits: list[int] = []
        for ts in sorted(by_ts):
            qs = by_ts[ts]
            commits.append(ts if any(m for _t, _s, m, _l in qs) else commits[-1])
            first = min(commits[-window:])
            lagging = [t for t, _s, _m, lg in qs if lg > 0]
            if lagging and ts - commits[-1] > commits[-1] - first:
                severity[(*key, ts)] = SEV["STOP"]
                topics[(*key, ts)] = set(lagging)
            else:
                severity[(*key, ts)] = max(s for _t, s, _m, _l in qs)
                topics[(*key, ts)] = {t for t, s, _m, _l in qs if s >= 2}
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
        g["state_ms"] = {name: sum(i for _, i, s, _c in states if s == v)
                         for name, v in SEV.items() if v > 0}
        episodes = []
        for run in islands([(ts, i, s) for ts, i, s, _c in states]):
            if run[0][2] >= 2:
                ts_list = [p[0] for p in run]
                cs_run = [g_cycles[(*key, t)] for t in ts_list]
                episodes.append({
                    "state": {v: k for k, v in SEV.items()}[run[0][2]],
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
