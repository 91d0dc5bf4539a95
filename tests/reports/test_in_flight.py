"""A POP group's messages in flight through the history and the report: the monitor's
writer stores them with each sample, a file written before the column existed reads as 0
in flight, and the report's group table and summary show the most in flight at once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqadmin.operations.lag.history import HistoryWriter
from mqadmin.operations.lag.model import Cycle, QueueSample
from mqadmin.reports import dataset
from mqadmin.reports.period import Period
from mqadmin.reports.schema import arrow_schema
from tests.mqadmin.cli import invoke
from tests.reports import lagdata

pytestmark = pytest.mark.timeout(900)

MINUTE = 60_000
BASE = lagdata.ms(lagdata.DAY + dt.timedelta(hours=9))


def pop_cycles() -> list[Cycle]:
    """Ten minutes of a POP group: lag 10 + i, of it 4 + i in flight (the most: 13)."""
    cycles = []
    for i in range(10):
        ts = BASE + i * MINUTE
        sample = QueueSample(ts, "pop-group", "orders", "broker-a", 0, 100 + 10 * i + 10 + i,
                             100 + 10 * i, 10 + i, 1000, None, None, ts, in_flight=4 + i)
        cycles.append(Cycle(ts, "test", MINUTE, (sample,), groups=("pop-group",)))
    return cycles


def old_file(root: Path) -> Path:
    """A push group's history as a monitor wrote it before the ``in_flight`` column."""
    schema = arrow_schema()
    old = schema.remove(schema.get_field_index("in_flight"))
    rows = [lagdata.sample(BASE + i * MINUTE, "push-group", "billing", 0, 50 + i, 40, 5_000)
            for i in range(10)]
    folder = root / "date=2026-11-23"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-old.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=old), path)
    return path


def test_history_keeps_in_flight_and_reads_files_without_it(
        spark: Any, tmp_path: Path, report_home: Path) -> None:
    root = tmp_path / "lag-history"
    writer = HistoryWriter(root, started_ms=BASE, pid=1, flush_cycles=100)
    for cycle in pop_cycles():
        writer.add(cycle)
    writer.flush()
    files = writer.files  # the first cycle's file, then the rest's
    stored = [r["in_flight"] for f in files
              for r in pq.read_table(f, partitioning=None).to_pylist()]
    assert stored == list(range(4, 14))
    assert "in_flight" not in pq.read_schema(old_file(root)).names

    period = Period("daily", lagdata.DAY, lagdata.DAY + dt.timedelta(days=1))
    rows = dataset.read(spark, str(root), [period])
    found = {(r["group"], r["in_flight"]) for r in rows.collect()}
    assert ("push-group", 0) in found and ("pop-group", 13) in found
    assert {g for g, n in found if n is None} == set()

    result = invoke("report", "lag", "--input", str(root), "--date", "2026-11-23", "-o", "json")
    assert result.exit_code == 0, result.output
    out = Path(json.loads(result.stdout)[0]["out"])
    summary = json.loads((out / "summary.json").read_text())
    groups = {g["group"]: g for g in summary["groups"]}
    assert groups["pop-group"]["in_flight_max"] == 13
    assert groups["push-group"]["in_flight_max"] == 0
    assert groups["pop-group"]["lag_max"] == 19
    [topic] = groups["pop-group"]["topics"]
    assert topic["in_flight_max"] == 13
    page = (out / "report.html").read_text()
    assert "<th>max in flight</th>" in page
    row = page[page.index(">pop-group<"):]
    assert "<td>19</td><td>13</td>" in row[:row.index("</tr>")]
