"""The recent window in the admin database: cycles saved, read back per queue, pruned."""

from __future__ import annotations

import dataclasses

from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.model import Cycle, Gap, QueueSample


def cycle(ts: int, lag: int) -> Cycle:
    s = QueueSample(ts, "g", "t", "broker-a", 0, 10 + lag, 10, lag, 5 if lag else 0, 1.0,
                    None, ts, 4096 if lag else None, lag > 3, 2)
    return Cycle(ts, "dev", 1000, (s,), (Gap(ts, "g", "broker-b", "timeout"),), ("g",), 3.5)


def test_window_round_trip_and_prune() -> None:
    db = win.open_db()
    for i in range(8):
        win.save_cycle(db, cycle(1000 * i, i), pid=42, keep=5)
    series = win.read_window(db, "dev")
    assert len(series) == 1 and series[0].key == ("g", "t", "broker-a", 0)
    assert [s.lag for s in series[0].samples] == [3, 4, 5, 6, 7]
    assert series[0].last == cycle(7000, 7).samples[0]
    assert [s.lag for s in win.read_window(db, "dev", cycles_back=2)[0].samples] == [6, 7]
    assert win.read_window(db, "dev", group="other") == []
    last = win.latest_cycle(db, "dev")
    assert last is not None and (last.ts, last.pid, last.gaps) == (7000, 42, 1)
    assert len(win.gaps(db, "dev")) == 5 and win.clusters(db) == ["dev"]
    win.save_state(db, "dev", 7000, [("g", "ERROR", True)])
    assert win.load_state(db, "dev") == {"g": ("ERROR", True)}


def test_status_judges_with_the_collectors_allowed_lag() -> None:
    from mqadmin.operations.lag.status import report_from_window

    db = win.open_db()
    for i in range(3):
        win.save_cycle(db, cycle(1000 * i, 4), allowed_lag=5)  # lag 4 all along: STALL at 0
    assert win.latest_cycle(db, "dev").allowed_lag == 5  # type: ignore[union-attr]
    mine = report_from_window("dev", fresh_only=False)
    assert mine is not None and mine.groups[0].verdict.status.value == "OK"
    strict = report_from_window("dev", fresh_only=False, allowed_lag=0)
    assert strict is not None and strict.groups[0].verdict.status.value == "ERROR"


def test_a_window_written_before_in_flight_reads_as_none_in_flight() -> None:
    from mqadmin import history

    path = history.db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = win.open_db(path)
    win.save_cycle(db, cycle(1000, 4))
    db.execute(f"ALTER TABLE {win.SAMPLES} DROP COLUMN in_flight")  # as an earlier version
    db.conn.commit()
    db.close()
    db = win.open_db(path)
    assert "in_flight" in db.table(win.SAMPLES).columns_dict
    [series] = win.read_window(db, "dev")
    assert [(s.lag, s.in_flight, s.ready) for s in series.samples] == [(4, 0, 4)]
    pop = cycle(2000, 6)
    win.save_cycle(db, Cycle(pop.ts, pop.cluster, pop.interval_ms,
                             (dataclasses.replace(pop.samples[0], in_flight=5),)))
    [series] = win.read_window(db, "dev")
    assert [(s.lag, s.in_flight, s.ready) for s in series.samples] == [(4, 0, 4), (6, 5, 1)]
