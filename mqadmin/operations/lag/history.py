"""The lag history as a Parquet dataset partitioned by date (pyarrow), for the Spark reports.

How this works: the collector hands every cycle to `HistoryWriter.add`, which keeps the
rows in columns; after the first cycle (so a report has a history as soon as the monitor
has sampled once), then every `flush_cycles` cycles, past `max_rows` rows, and at stop, the
buffer is written as one file per date, ``<dir>/date=YYYY-MM-DD/part-<start>-<pid>-<seq>
.parquet``, in row groups of up to `row_group_rows` rows.  A file is written under a dot
name and renamed into place, so readers (Spark skips dot files) never see half a file and
a crash loses only the unflushed buffer (the SQLite window still holds the last cycles).
The columns are the history's of the lag sample schema (mqadmin/reports/schema.py, which the
report job reads them by): column order, types, where each value comes from (the sample or
the cycle), and gap rows (``ok = false``, queue -1, empty topic, nulls) for group x broker
pairs that could not be sampled.  pyarrow is imported on the first
flush, not with the module: every mqadmin command imports this one.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from mqadmin.operations.lag.model import Cycle, Gap, QueueSample
from mqadmin.reports.schema import CYCLE, HISTORY, NAMES, OK_ROW, SAMPLE, Field, arrow_schema

FLUSH_CYCLES = 30
MAX_ROWS = 200_000
ROW_GROUP_ROWS = 100_000


def _sample_value(f: Field, cycle: Cycle, s: QueueSample) -> Any:
    if f.source == SAMPLE:
        return getattr(s, f.name)
    return getattr(cycle, f.name) if f.source == CYCLE else OK_ROW


def _gap_value(f: Field, cycle: Cycle, g: Gap) -> Any:
    if f.gap_own:
        return getattr(g, f.name)
    return getattr(cycle, f.name) if f.source == CYCLE else f.gap


def day_of(ts_ms: int) -> str:
    return dt.datetime.fromtimestamp(ts_ms / 1000, dt.UTC).strftime("%Y-%m-%d")


class HistoryWriter:
    """Buffers cycles and appends them to the dataset under `root` (``.../lag-history``)."""

    def __init__(self, root: Path, *, started_ms: int, pid: int | None = None,
                 flush_cycles: int = FLUSH_CYCLES, max_rows: int = MAX_ROWS,
                 row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.root = root
        self.stamp = dt.datetime.fromtimestamp(started_ms / 1000, dt.UTC).strftime(
            "%Y%m%dT%H%M%SZ")
        self.pid = os.getpid() if pid is None else pid
        self.flush_cycles = flush_cycles
        self.max_rows = max_rows
        self.row_group_rows = row_group_rows
        self.seq = 0
        self.cycles = 0
        self.added = 0  # cycles ever added: the first is written at once
        self.files: list[Path] = []
        self._cols: dict[str, list[Any]] = {name: [] for name in NAMES}

    @property
    def buffered(self) -> int:
        return len(self._cols["ts"])

    def add(self, cycle: Cycle) -> list[Path]:
        """Buffer one cycle; returns the files written when that made a flush due."""
        for f in HISTORY:
            column = self._cols[f.name]
            column.extend(_sample_value(f, cycle, s) for s in cycle.samples)
            column.extend(_gap_value(f, cycle, g) for g in cycle.gaps)
        self.cycles += 1
        self.added += 1
        if self.added == 1 or self.cycles >= self.flush_cycles \
                or self.buffered >= self.max_rows:
            return self.flush()
        return []

    def flush(self) -> list[Path]:
        """Write what is buffered, one file per date; returns the files written."""
        self.cycles = 0
        if not self.buffered:
            return []
        import pyarrow as pa

        table = pa.table(self._cols, schema=arrow_schema())
        self._cols = {name: [] for name in NAMES}
        days = [day_of(t) for t in table.column("ts").cast(pa.int64()).to_pylist()]
        written = []
        for day in sorted(set(days)):
            part = table if len(set(days)) == 1 else table.filter(
                pa.array([d == day for d in days]))
            written.append(self._write(day, part))
        self.files += written
        return written

    def _write(self, day: str, table: Any) -> Path:
        import pyarrow.parquet as pq

        folder = self.root / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        self.seq += 1
        name = f"part-{self.stamp}-{self.pid}-{self.seq:05d}.parquet"
        tmp = folder / f".{name}.tmp"
        pq.write_table(table, tmp, row_group_size=self.row_group_rows, compression="zstd")
        final = folder / name
        tmp.replace(final)
        return final
