"""One lag sample schema (mqadmin/reports/schema.py): the monitor's values, its SQLite window
and its Parquet history all follow the declaration, and a window from before a field reads
the field's default."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mqadmin import history
from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.history import HistoryWriter
from mqadmin.operations.lag.model import Cycle, Gap, QueueSample
from mqadmin.reports import dataset, schema

TS = 1_764_000_000_000


def full_sample() -> QueueSample:
    """A sample with no field at its default, so a lost field shows."""
    return QueueSample(TS, "g", "t", "broker-a", 3, 120, 100, 20, 7_000, 1.5, 0.5, TS - 2_000,
                       oldest_phys=4_096, retention_risk=True, risk_messages=9, in_flight=6)


def full_cycle() -> Cycle:
    return Cycle(TS, "dev", 10_000, (full_sample(),), (Gap(TS, "g", "broker-b", "timeout"),),
                 ("g",))


def test_the_sample_holds_exactly_the_declared_sample_fields() -> None:
    declared = [f.name for f in schema.FIELDS if f.source == schema.SAMPLE]
    assert [f.name for f in dataclasses.fields(QueueSample)] == declared


def test_the_report_reads_the_columns_the_declaration_gives_the_history() -> None:
    assert dataset.COLUMNS == schema.NAMES == tuple(f.name for f in schema.HISTORY)
    assert dataset.schema() == schema.spark_ddl()
    assert schema.DEFAULTS == {"risk_messages": 0, "in_flight": 0}


def test_the_window_table_and_its_rows_follow_the_declaration() -> None:
    db = win.open_db()
    assert db.table(win.SAMPLES).columns_dict == {
        f.column: schema.SQLITE_TYPES[f.kind] for f in schema.WINDOW}
    win.save_cycle(db, full_cycle())
    [row] = db.table(win.SAMPLES).rows
    sample = full_sample()
    assert row == {f.column: "dev" if f.source == schema.CYCLE
                   else int(getattr(sample, f.name)) if f.kind == "boolean"
                   else getattr(sample, f.name) for f in schema.WINDOW}
    [series] = win.read_window(db, "dev")
    assert series.samples == (sample,)


def test_a_window_from_before_the_defaulted_fields_gets_them_and_reads_their_defaults(
        ) -> None:
    path = history.db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = win.open_db(path)
    win.save_cycle(db, full_cycle())
    added = [f for f in schema.WINDOW if f.default is not None]
    for f in added:  # as a version before them wrote it
        db.execute(f"ALTER TABLE {win.SAMPLES} DROP COLUMN {f.column}")
    db.conn.commit()
    db.close()
    db = win.open_db(path)
    assert {f.column for f in added} <= set(db.table(win.SAMPLES).columns_dict)
    [series] = win.read_window(db, "dev")
    assert series.samples == (dataclasses.replace(
        full_sample(), **{f.name: f.default for f in added}),)


def test_the_history_writes_the_declared_columns_for_samples_and_gaps(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    writer = HistoryWriter(tmp_path, started_ms=TS)
    [written] = writer.add(full_cycle())
    table = pq.read_table(written)
    assert table.schema.equals(schema.arrow_schema())
    assert tuple(table.column_names) == schema.NAMES
    sample_row, gap_row = table.to_pylist()
    sample = full_sample()
    for f in schema.HISTORY:
        want = (getattr(sample, f.name) if f.source == schema.SAMPLE
                else getattr(full_cycle(), f.name) if f.source == schema.CYCLE
                else schema.OK_ROW)
        got = sample_row[f.name]
        assert (int(got.timestamp() * 1000) if f.kind == "timestamp" else got) == want, f.name
    gap = full_cycle().gaps[0]
    for f in schema.HISTORY:
        want = (getattr(gap, f.name) if f.gap_own
                else getattr(full_cycle(), f.name) if f.source == schema.CYCLE else f.gap)
        got = gap_row[f.name]
        assert (int(got.timestamp() * 1000) if f.kind == "timestamp" else got) == want, f.name
