"""The report's machine-readable result: the small aggregated rows Spark returned, shaped
into summary.json (nested) and one flat row per group (summary.parquet, summary.csv)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .period import Period, iso

Row = dict[str, Any]
TOP = 10
SAME_BAND = 0.10  # p95 time lag within ±10% of the previous period's reads as "same"

FLAT_COLUMNS = (
    "cluster", "group", "samples", "gap_cycles", "gap_minutes", "coverage",
    "lag_p50", "lag_p95", "lag_p99", "lag_max",
    "lag_ms_p50", "lag_ms_p95", "lag_ms_p99", "lag_ms_max",
    "slo_ms", "slo_minutes", "stop_minutes", "rewind_minutes", "stall_minutes",
    "warning_minutes", "episodes", "risk_episodes", "risk_minutes", "risk_messages_max",
    "worst_hour", "previous_slo_minutes", "previous_lag_ms_p95", "trend", "in_flight_max",
)
_FIGURES = ("samples", "timed_samples", "lag_p50", "lag_p95", "lag_p99", "lag_max",
            "lag_ms_p50", "lag_ms_p95", "lag_ms_p99", "lag_ms_max", "slo_ms",
            "risk_messages_max", "in_flight_max")


def ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return iso(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))


def minutes(ms: int | None) -> float:
    """Milliseconds as minutes, rounded to 1/1000 min (the exact value is ``*_ms``)."""
    return round((ms or 0) / 60_000, 3)


def _figures(row: Mapping[str, Any]) -> Row:
    out: Row = {k: row.get(k) for k in _FIGURES}
    out |= {"breach_ms": row.get("breach_ms") or 0,
            "slo_minutes": minutes(row.get("breach_ms")),
            "risk_minutes": minutes(row.get("risk_ms"))}
    return out


def trend(current: Mapping[str, Any], previous: Mapping[str, Any] | None) -> Row:
    """The change against the previous period: better, worse, same, or new (no samples
    before)."""
    if not previous or not previous.get("samples"):
        return {"direction": "new", "previous_slo_minutes": None,
                "previous_lag_ms_p95": None, "slo_minutes_change": None}
    now_b, was_b = current.get("breach_ms") or 0, previous.get("breach_ms") or 0
    now_p, was_p = current.get("lag_ms_p95"), previous.get("lag_ms_p95")
    if now_b != was_b:
        direction = "worse" if now_b > was_b else "better"
    elif now_p is None or was_p is None or abs(now_p - was_p) <= SAME_BAND * max(was_p, 1):
        direction = "same"
    else:
        direction = "worse" if now_p > was_p else "better"
    return {"direction": direction, "previous_slo_minutes": minutes(was_b),
            "previous_lag_ms_p95": was_p, "slo_minutes_change": minutes(now_b - was_b)}


def _by_group(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        out[(row["cluster"], row["group"])].append(row)
    return out


def _episode(row: Mapping[str, Any]) -> Row:
    out: Row = {"start": ms_iso(row["start"]), "end": ms_iso(row["end"]),
                "minutes": minutes(row["duration_ms"]), "cycles": row["cycles"],
                "lag_max": row["lag_max"], "lag_ms_max": row["lag_ms_max"]}
    if "state" in row:
        out = {"state": row["state"], **out, "topics": list(row["topics"] or []),
               "queues": row["queues"]}
    else:
        out["risk_messages_max"] = row["risk_messages_max"]
    return out


def build(period: Period, *, inputs: str, slo: Mapping[str, Any], window: int,
          groups: Sequence[Mapping[str, Any]], topics: Sequence[Mapping[str, Any]],
          previous: Sequence[Mapping[str, Any]], hours: Sequence[Mapping[str, Any]],
          states: Sequence[Mapping[str, Any]], episodes: Sequence[Mapping[str, Any]],
          risks: Sequence[Mapping[str, Any]], heat: Sequence[Mapping[str, Any]]) -> Row:
    """summary.json's document from the collected aggregates (rows as dicts, times as
    epoch milliseconds)."""
    prev = {(r["cluster"], r["group"]): r for r in previous}
    state = {(r["cluster"], r["group"]): r for r in states}
    by_topic, by_hour = _by_group(topics), _by_group(hours)
    by_episode, by_risk = _by_group(episodes), _by_group(risks)
    out_groups = []
    for g in sorted(groups, key=lambda r: (r["cluster"], r["group"])):
        key = (g["cluster"], g["group"])
        row: Row = {"cluster": key[0], "group": key[1], **_figures(g),
                    "gap_cycles": g["gap_cycles"], "gap_minutes": minutes(g["gap_ms"]),
                    "coverage": round(g["coverage"], 4)}
        row |= {f"{s}_minutes": minutes(state.get(key, {}).get(f"{s}_ms"))
                for s in ("stop", "rewind", "stall", "warning")}
        row["worst_hours"] = [
            {"hour": ms_iso(h["hour"]), "slo_minutes": minutes(h["breach_ms"]),
             "lag_ms_max": h["lag_ms_max"], "lag_max": h["lag_max"]}
            for h in sorted(by_hour.get(key, []), key=lambda h: h["rank"])]
        row["episodes"] = [_episode(e) for e in sorted(by_episode.get(key, []),
                                                       key=lambda e: e["start"])]
        row["risk_episodes"] = [_episode(e) for e in sorted(by_risk.get(key, []),
                                                            key=lambda e: e["start"])]
        row["trend"] = trend(row, prev.get(key))
        row["topics"] = [{"topic": t["topic"], **_figures(t)}
                         for t in sorted(by_topic.get(key, []), key=lambda t: t["topic"])]
        out_groups.append(row)
    offenders = sorted((g for g in out_groups if g["breach_ms"] > 0),
                       key=lambda g: (-g["breach_ms"], -(g["lag_ms_p95"] or 0), g["group"]))
    heat_rows: dict[tuple[str, str], list[int | None]] = defaultdict(lambda: [None] * 24)
    for h in heat:
        heat_rows[(h["cluster"], h["group"])][h["hour_of_day"]] = h["lag_ms_p95"]
    return {
        "report": "consumer-lag", "version": 1,
        "period": _period(period), "previous_period": _period(period.previous()),
        "generated_at": iso(dt.datetime.now(dt.UTC)), "input": inputs,
        "slo": dict(slo), "verdict_window": window,
        "totals": {
            "groups": len(out_groups),
            "samples": sum(g["samples"] for g in out_groups),
            "groups_in_breach": len(offenders),
            "slo_minutes": minutes(sum(g["breach_ms"] for g in out_groups)),
            "episodes": sum(len(g["episodes"]) for g in out_groups),
            "risk_episodes": sum(len(g["risk_episodes"]) for g in out_groups),
        },
        "top_offenders": [
            {"rank": i + 1, "cluster": g["cluster"], "group": g["group"],
             "slo_minutes": g["slo_minutes"], "slo_ms": g["slo_ms"],
             "lag_ms_p95": g["lag_ms_p95"], "lag_ms_max": g["lag_ms_max"],
             "trend": g["trend"]["direction"]}
            for i, g in enumerate(offenders[:TOP])],
        "heatmap": {"hours_utc": list(range(24)), "metric": "p95 time lag (ms)",
                    "rows": [{"cluster": c, "group": n, "lag_ms_p95": v}
                             for (c, n), v in sorted(heat_rows.items())]},
        "groups": out_groups,
    }


def _period(p: Period) -> Row:
    return {"kind": p.kind, "label": p.label, "start": iso(p.start), "end": iso(p.end)}


def flat_rows(summary: Mapping[str, Any]) -> list[Row]:
    """One row per group with FLAT_COLUMNS (summary.parquet and summary.csv)."""
    rows = []
    for g in summary["groups"]:
        worst = g["worst_hours"][0]["hour"] if g["worst_hours"] else None
        rows.append({**{c: g.get(c) for c in FLAT_COLUMNS},
                     "episodes": len(g["episodes"]), "risk_episodes": len(g["risk_episodes"]),
                     "worst_hour": worst,
                     "previous_slo_minutes": g["trend"]["previous_slo_minutes"],
                     "previous_lag_ms_p95": g["trend"]["previous_lag_ms_p95"],
                     "trend": g["trend"]["direction"]})
    return rows


def write(summary: Mapping[str, Any], out: Path) -> list[Path]:
    """summary.json, summary.parquet and summary.csv in `out`; returns their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = flat_rows(summary)
    json_path, parquet_path, csv_path = (out / "summary.json", out / "summary.parquet",
                                         out / "summary.csv")
    json_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                         encoding="utf-8")
    table = pa.Table.from_pylist(rows, schema=_schema()) if rows else _schema().empty_table()
    pq.write_table(table, parquet_path)
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, FLAT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return [json_path, parquet_path, csv_path]


def _schema() -> Any:
    import pyarrow as pa

    types = {"cluster": pa.string(), "group": pa.string(), "coverage": pa.float64(),
             "worst_hour": pa.string(), "trend": pa.string()}
    return pa.schema([(c, types.get(c, pa.float64() if "minutes" in c else pa.int64()))
                      for c in FLAT_COLUMNS])
