"""Small lag histories for the report tests: rows as dicts, written in the monitor's
Parquet layout (date partitions, the lag sample schema's Arrow types)."""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mqadmin.reports.schema import arrow_schema

Row = dict[str, Any]
DAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


def ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def sample(ts: int, group: str, topic: str, queue_id: int, broker_offset: int,
           consumer_offset: int, lag_ms: int | None, *, interval_ms: int = 60_000,
           broker: str = "broker-a", cluster: str = "test", risk_messages: int = 0) -> Row:
    lag = broker_offset - consumer_offset
    return {"ts": ts, "cluster": cluster, "group": group, "topic": topic, "broker": broker,
            "queue_id": queue_id, "broker_offset": broker_offset,
            "consumer_offset": consumer_offset, "lag": lag,
            "lag_ms": 0 if lag == 0 else lag_ms, "produce_rate": None, "consume_rate": None,
            "interval_ms": interval_ms, "ok": True, "retention_risk": risk_messages > 0,
            "risk_messages": risk_messages}


def gap(ts: int, group: str, *, interval_ms: int = 60_000, broker: str = "broker-a",
        cluster: str = "test") -> Row:
    return {"ts": ts, "cluster": cluster, "group": group, "topic": "", "broker": broker,
            "queue_id": -1, "broker_offset": None, "consumer_offset": None, "lag": None,
            "lag_ms": None, "produce_rate": None, "consume_rate": None,
            "interval_ms": interval_ms, "ok": False, "retention_risk": False,
            "risk_messages": 0}


def write(rows: list[Row], root: Path, part: str = "part-0") -> Path:
    """`rows` under ``root/date=YYYY-MM-DD/<part>.parquet``; returns `root`."""
    by_date: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        day = dt.datetime.fromtimestamp(row["ts"] / 1000, dt.UTC).date().isoformat()
        by_date[day].append(row)
    schema = arrow_schema()
    for day, day_rows in by_date.items():
        folder = root / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(sorted(day_rows, key=lambda r: r["ts"]), schema=schema)
        pq.write_table(table, folder / f"{part}.parquet")
    return root


def random_history(seed: int, start: dt.datetime, cycles: int, *, groups: int = 3,
                   interval_ms: int = 60_000) -> list[Row]:
    """A random history: per group 1-2 topics of 2 queues on 1-2 brokers; offsets that
    progress, stall, stop and rewind at random; unknown time lags; gaps; missing cycles;
    retention risks."""
    rnd = random.Random(seed)
    rows: list[Row] = []
    layout = []
    for g in range(groups):
        for t in range(rnd.randint(1, 2)):
            for q in range(2):
                layout.append((f"group-{g}", f"topic-{g}-{t}", f"broker-{'ab'[q % 2]}", q))
    state = {key: [rnd.randint(0, 50), 0] for key in layout}
    for c in range(cycles):
        ts = ms(start) + c * interval_ms
        if rnd.random() < 0.05:
            continue  # the collector was down: a missing cycle
        gaps = {(f"group-{g}", b) for g in range(groups) for b in ("broker-a", "broker-b")
                if rnd.random() < 0.04}
        for group, broker in sorted(gaps):
            rows.append(gap(ts, group, broker=broker, interval_ms=interval_ms))
        for key in layout:
            group, topic, broker, q = key
            if (group, broker) in gaps:
                continue
            st = state[key]
            st[0] += rnd.choice((0, 0, 1, 5, 20, 60))
            move = rnd.random()
            if move < 0.55:
                st[1] = min(st[0], st[1] + rnd.randint(0, 40))
            elif move < 0.6:
                st[1] = max(0, st[1] - rnd.randint(1, 30))  # rewind
            lag = st[0] - st[1]
            lag_ms = None if rnd.random() < 0.05 else lag * rnd.randint(500, 9000)
            risk = rnd.randint(1, lag) if lag > 30 and rnd.random() < 0.3 else 0
            rows.append(sample(ts, group, topic, q, st[0], st[1], lag_ms,
                               interval_ms=interval_ms, broker=broker, risk_messages=risk))
    return rows
