"""The lag monitor's recent window in the admin SQLite database (sqlite-utils).

How this works: the collector appends each cycle's samples (``lag_samples``), its gaps
(``lag_gaps``) and one line about the cycle itself (``lag_cycles``: when, how long, how
many groups) to ``mqadmin.db``, and keeps only the newest `KEEP_CYCLES` cycles per
cluster.  `read_window` gives the CLI and the dashboard each queue's last N samples;
`latest_cycle` says whether a collector is running (its last cycle is recent).  The
verdict each group was last alerted with is kept in ``lag_state``, so a restarted
collector does not alert twice; the latest retention forecasts in ``lag_risks``.  WAL
mode and a busy timeout let the collector, the CLI and the dashboard share the file.
The samples' columns, the rows written and the samples read back come from the lag sample
schema (mqadmin/reports/schema.py, `WINDOW`); a window made by an earlier version gets the
columns it lacks added, and its old rows read as the field's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin import history
from mqadmin.operations.lag.model import Cycle, QueueKey, QueueSample, Series
from mqadmin.operations.lag.retention import Risk
from mqadmin.reports.schema import CYCLE, SQLITE_TYPES, WINDOW

if TYPE_CHECKING:
    from sqlite_utils import Database

SAMPLES = "lag_samples"
CYCLES = "lag_cycles"
GAPS = "lag_gaps"
STATE = "lag_state"
RISKS = "lag_risks"
#: Cycles kept per cluster (the default window is 10; sparklines show up to this many).
KEEP_CYCLES = 60

_SAMPLE_COLUMNS: dict[str, type] = {f.column: SQLITE_TYPES[f.kind] for f in WINDOW}
#: The fields a `QueueSample` holds (the cluster is the cycle's).
_SAMPLE_FIELDS = tuple(f for f in WINDOW if f.source != CYCLE)


@dataclass(frozen=True, slots=True)
class CycleInfo:
    """One line of ``lag_cycles``."""

    cluster: str
    ts: int
    interval_ms: int
    groups: int
    queues: int
    gaps: int
    duration_ms: float
    error: str
    pid: int
    allowed_lag: int = 0  # the collector's --allowed-lag


def open_db(path: Path | None = None) -> Database:
    """The admin database with the lag tables (created when missing)."""
    return history.open_db(path, tables=_tables)


def _tables(db: Database) -> None:
    names = set(db.table_names())
    if SAMPLES not in names:
        db.table(SAMPLES).create(_SAMPLE_COLUMNS)
        db.table(SAMPLES).create_index(["cluster", "ts"])
        db.table(SAMPLES).create_index(["cluster", "consumer_group", "ts"])
    else:  # a window of an earlier version lacks the fields added since
        have = db.table(SAMPLES).columns_dict
        for column, kind in _SAMPLE_COLUMNS.items():
            if column not in have:
                db.table(SAMPLES).add_column(column, kind)
    if CYCLES not in names:
        db.table(CYCLES).create({"cluster": str, "ts": int, "interval_ms": int, "groups": int,
                                 "queues": int, "gaps": int, "duration_ms": float,
                                 "error": str, "pid": int, "allowed_lag": int})
        db.table(CYCLES).create_index(["cluster", "ts"])
    elif "allowed_lag" not in db.table(CYCLES).columns_dict:  # a window of an earlier version
        db.table(CYCLES).add_column("allowed_lag", int)
    if GAPS not in names:
        db.table(GAPS).create({"cluster": str, "ts": int, "consumer_group": str,
                               "broker": str, "reason": str})
        db.table(GAPS).create_index(["cluster", "ts"])
    if RISKS not in names:
        db.table(RISKS).create({"cluster": str, "ts": int, "consumer_group": str, "topic": str,
                                "broker": str, "queue_id": int, "deletes_at": int,
                                "segment": str, "at_risk": int, "messages": int,
                                "consume_rate": float, "needed_rate": float})
        db.table(RISKS).create_index(["cluster"])
    if STATE not in names:
        db.table(STATE).create({"cluster": str, "consumer_group": str, "status": str,
                                "risk": int, "ts": int}, pk=("cluster", "consumer_group"))


def _sample_row(cycle: Cycle, s: QueueSample) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for f in WINDOW:
        value = getattr(cycle if f.source == CYCLE else s, f.name)
        row[f.column] = int(value) if f.kind == "boolean" else value
    return row


def _sample(row: Mapping[str, Any]) -> QueueSample:
    values: dict[str, Any] = {}
    for f in _SAMPLE_FIELDS:
        value = row[f.column]
        if value is None and f.default is not None:  # a row from before the field
            value = f.default
        values[f.name] = bool(value) if f.kind == "boolean" else value
    return QueueSample(**values)


def save_cycle(db: Database, cycle: Cycle, *, pid: int = 0, keep: int = KEEP_CYCLES,
               allowed_lag: int = 0) -> None:
    """Append one cycle and drop the cluster's cycles older than the newest `keep`."""
    with db.conn:
        db.table(SAMPLES).insert_all((_sample_row(cycle, s) for s in cycle.samples),
                                     batch_size=2000)
        db.table(GAPS).insert_all({"cluster": cycle.cluster, "ts": g.ts,
                                   "consumer_group": g.group, "broker": g.broker,
                                   "reason": g.reason} for g in cycle.gaps)
        db.table(CYCLES).insert({
            "cluster": cycle.cluster, "ts": cycle.ts, "interval_ms": cycle.interval_ms,
            "groups": len(cycle.groups), "queues": len(cycle.samples), "gaps": len(cycle.gaps),
            "duration_ms": round(cycle.duration_ms, 1), "error": cycle.error, "pid": pid,
            "allowed_lag": allowed_lag})
        cut = db.execute(f"SELECT ts FROM {CYCLES} WHERE cluster = ? ORDER BY ts DESC "
                         "LIMIT 1 OFFSET ?", [cycle.cluster, keep - 1]).fetchone()
        if cut is not None:
            for table in (SAMPLES, GAPS, CYCLES):
                db.execute(f"DELETE FROM {table} WHERE cluster = ? AND ts < ?",
                           [cycle.cluster, cut[0]])


def _cycle_info(row: tuple[Any, ...]) -> CycleInfo:
    cluster, ts, interval, groups, queues, gaps, duration, error, pid, allowed = row
    return CycleInfo(cluster, ts, interval, groups, queues, gaps, duration, error, pid,
                     allowed or 0)


def cycles(db: Database, cluster: str, limit: int = KEEP_CYCLES) -> list[CycleInfo]:
    """The cluster's newest `limit` cycles, oldest first."""
    rows = db.execute(f"SELECT cluster, ts, interval_ms, groups, queues, gaps, duration_ms, "
                      f"error, pid, allowed_lag FROM {CYCLES} WHERE cluster = ? "
                      "ORDER BY ts DESC LIMIT ?",
                      [cluster, limit]).fetchall()
    return [_cycle_info(r) for r in reversed(rows)]


def latest_cycle(db: Database, cluster: str) -> CycleInfo | None:
    found = cycles(db, cluster, 1)
    return found[-1] if found else None


def clusters(db: Database) -> list[str]:
    """Clusters with samples in the window."""
    return [r[0] for r in db.execute(f"SELECT DISTINCT cluster FROM {CYCLES} ORDER BY 1")]


def read_window(db: Database, cluster: str, *, group: str | None = None,
                cycles_back: int = KEEP_CYCLES) -> list[Series]:
    """Each queue's samples from the cluster's last `cycles_back` cycles, oldest first."""
    cut = db.execute(f"SELECT ts FROM {CYCLES} WHERE cluster = ? ORDER BY ts DESC "
                     "LIMIT 1 OFFSET ?", [cluster, cycles_back - 1]).fetchone()
    where = "cluster = ? AND ts >= ?"
    args: list[Any] = [cluster, cut[0] if cut else 0]
    if group is not None:
        where += " AND consumer_group = ?"
        args.append(group)
    rows = db.table(SAMPLES).rows_where(
        where, args, order_by="consumer_group, topic, broker, queue_id, ts")
    found: dict[QueueKey, list[QueueSample]] = {}
    for row in rows:
        s = _sample(row)
        found.setdefault(s.key, []).append(s)
    return [Series(k, tuple(v)) for k, v in found.items()]


def gaps(db: Database, cluster: str, since_ts: int = 0) -> list[dict[str, Any]]:
    """The gaps recorded since `since_ts` (ms), oldest first."""
    return list(db.table(GAPS).rows_where("cluster = ? AND ts >= ?", [cluster, since_ts],
                                          order_by="ts"))


def load_state(db: Database, cluster: str) -> dict[str, tuple[str, bool]]:
    """The status and risk each group was last alerted with."""
    return {r["consumer_group"]: (r["status"], bool(r["risk"]))
            for r in db.table(STATE).rows_where("cluster = ?", [cluster])}


def save_state(db: Database, cluster: str, ts: int,
               states: Iterable[tuple[str, str, bool]]) -> None:
    """Remember (group, status, risk) as alerted."""
    db.table(STATE).upsert_all(({"cluster": cluster, "consumer_group": g, "status": s,
                                 "risk": int(r), "ts": ts} for g, s, r in states),
                               pk=("cluster", "consumer_group"))


def save_risks(db: Database, cluster: str, ts: int, risks: Iterable[Risk]) -> None:
    """Replace the cluster's retention forecasts with those of the cycle at `ts`."""
    with db.conn:
        db.execute(f"DELETE FROM {RISKS} WHERE cluster = ?", [cluster])
        db.table(RISKS).insert_all(
            {"cluster": cluster, "ts": ts, "consumer_group": r.key[0], "topic": r.key[1],
             "broker": r.key[2], "queue_id": r.key[3], "deletes_at": r.deletes_at_ms,
             "segment": r.segment, "at_risk": r.at_risk, "messages": r.messages,
             "consume_rate": r.consume_rate,
             "needed_rate": r.needed_rate if r.needed_rate != float("inf") else -1.0}
            for r in risks)


def read_risks(db: Database, cluster: str) -> list[Risk]:
    """The cluster's latest retention forecasts."""
    return [Risk((r["consumer_group"], r["topic"], r["broker"], r["queue_id"]),
                 r["deletes_at"], r["segment"], r["at_risk"], r["messages"],
                 r["consume_rate"], r["needed_rate"] if r["needed_rate"] >= 0 else float("inf"))
            for r in db.table(RISKS).rows_where("cluster = ?", [cluster])]
