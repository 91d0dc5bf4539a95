"""The job reads exactly what the lag monitor writes: the same Arrow schema, and a file from
the monitor's own writer (HistoryWriter) read through the job's reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqadmin.operations.lag_history import SCHEMA, HistoryWriter
from mqadmin.operations.lag_model import Cycle, Gap, QueueSample
from mqadmin.reports import dataset, period
from mqadmin.reports.schema import arrow_schema
from tests.reports import lagdata

pytestmark = pytest.mark.timeout(900)


def test_the_schemas_are_the_contract() -> None:
    assert [(f.name, f.type) for f in SCHEMA] == [(f.name, f.type) for f in arrow_schema()]
    assert [f.name for f in SCHEMA] == list(dataset.COLUMNS)


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
