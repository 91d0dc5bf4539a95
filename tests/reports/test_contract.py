"""The job reads exactly what the lag monitor writes: one schema (the lag sample schema's), and
a file from the monitor's own writer (HistoryWriter) read through the job's reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqadmin.operations.lag.history import HistoryWriter
from mqadmin.operations.lag.model import Cycle, Gap, QueueSample
from mqadmin.reports import dataset, period, schema
from tests.reports import lagdata

pytestmark = pytest.mark.timeout(900)


def test_writer_and_reader_use_the_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    assert dataset.COLUMNS == schema.NAMES
    assert dataset.schema().startswith("`ts` timestamp, `cluster` string")
    writer = HistoryWriter(tmp_path, started_ms=lagdata.ms(lagdata.DAY))
    ts = lagdata.ms(lagdata.DAY)
    sample = QueueSample(ts, "g", "T", "broker-a", 0, 5, 4, 1, 100, None, None, ts)
    assert writer.add(Cycle(ts, "dev", 10_000, (sample,))) != []
    [written] = writer.files
    assert pq.read_schema(written).equals(schema.arrow_schema())


def test_the_first_cycle_is_written_at_once_then_every_flush_cycles(tmp_path: Path) -> None:
    """A report made just after the monitor started finds its first cycle's rows."""
    writer = HistoryWriter(tmp_path, started_ms=lagdata.ms(lagdata.DAY), flush_cycles=3)
    written = []
    for i in range(7):
        ts = lagdata.ms(lagdata.DAY) + i * 10_000
        sample = QueueSample(ts, "g", "T", "broker-a", 0, 5, 4, 1, 100, None, None, ts)
        written.append(len(writer.add(Cycle(ts, "dev", 10_000, (sample,)))))
    assert written == [1, 0, 0, 1, 0, 0, 1] and writer.buffered == 0


def test_the_reader_reads_the_monitors_files(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "lag-history"
    writer = HistoryWriter(root, started_ms=lagdata.ms(lagdata.DAY))
    for i in range(3):
        ts = lagdata.ms(lagdata.DAY) + i * 10_000
        sample = QueueSample(ts, "g", "T", "broker-a", 0, 100 + i, 90 + i, 10, 4_000, 1.0,
                             1.0, ts)
        writer.add(Cycle(ts, "dev", 10_000, (sample,), (Gap(ts, "g", "broker-b", "down"),)))
    writer.flush()
    rows = dataset.read(spark, str(root), [period.resolve("daily", date="2026-11-23")])
    got = sorted((r["ok"], r["lag"], r["broker"]) for r in rows.collect())
    assert got == [(False, None, "broker-b")] * 3 + [(True, 10, "broker-a")] * 3
