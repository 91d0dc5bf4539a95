"""The transforms on tiny DataFrames built here: verdict rules per sample and gaps/islands
(conventions: pure DataFrame -> DataFrame, tested in isolation)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mqadmin.reports import episodes

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)

T0 = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
COLS = ("cluster", "group", "topic", "broker", "queue_id", "ts", "consumer_offset", "lag",
        "lag_ms", "interval_ms", "ok", "retention_risk", "risk_messages")


def frame(spark: Any, series: dict[tuple[str, int], list[tuple[int, int]]]) -> Any:
    """Rows from {(group, queue): [(consumer_offset, lag), ...]} one minute apart."""
    rows = [("c", group, "t", "b", queue, T0 + dt.timedelta(minutes=i), off, lag, lag * 1000,
             60_000, True, False, 0)
            for (group, queue), points in series.items() for i, (off, lag) in enumerate(points)]
    return spark.createDataFrame(rows, list(COLS))


def last_states(spark: Any, series: dict[tuple[str, int], list[tuple[int, int]]],
                window: int = 5) -> tuple[dict[tuple[str, int], str], dict[str, str]]:
    """The last verdict of each queue (every rule but STOP) and of each group."""
    verdicts = episodes.queue_verdicts(frame(spark, series), window)
    queues = {(r["group"], r["queue_id"]): episodes.NAMES[r["severity"]]
              for r in verdicts.orderBy("ts").collect()}
    groups = {r["group"]: episodes.NAMES[r["severity"]]
              for r in episodes.group_states(verdicts, window).orderBy("ts").collect()}
    return queues, groups


def test_verdict_rules(spark: Any) -> None:
    queues, groups = last_states(spark, {
        ("draining", 0): [(i * 10, 50 - i * 10) for i in range(6)],  # lag reaches 0 -> OK
        ("slow", 0): [(i, 10 + i) for i in range(6)],  # moves, lag grows -> WARNING
        ("ok-ish", 0): [(i * 3, 10 + (i % 2)) for i in range(6)],  # lag also falls -> OK
        ("stuck", 0): [(5, 10 + i) for i in range(6)],  # this queue stands still ...
        ("stuck", 1): [(i * 5, 3 * (i % 2)) for i in range(6)],  # ... another moves -> STALL
        ("gone", 0): [(5, 10 + i) for i in range(6)],  # every queue still -> STOP
        ("rewound", 0): [(100, 5), (110, 5), (120, 5), (60, 65), (61, 66), (62, 66)],
        ("idle", 0): [(7, 0)] * 6,  # no traffic, no lag -> OK
    })
    assert queues == {("draining", 0): "OK", ("slow", 0): "WARNING", ("ok-ish", 0): "OK",
                      ("stuck", 0): "STALL", ("stuck", 1): "OK", ("gone", 0): "STALL",
                      ("rewound", 0): "REWIND", ("idle", 0): "OK"}
    assert groups == {"draining": "OK", "slow": "WARNING", "ok-ish": "OK", "stuck": "STALL",
                      "gone": "STOP", "rewound": "REWIND", "idle": "OK"}


def test_stop_needs_the_standstill_to_outlast_the_window_span(spark: Any) -> None:
    moving = [(i * 10, 100 - i) for i in range(8)]

    def states(points: list[tuple[int, int]]) -> list[str]:
        verdicts = episodes.queue_verdicts(frame(spark, {("g", 0): points}), 10)
        return [episodes.NAMES[r["severity"]]
                for r in episodes.group_states(verdicts, 10).orderBy("ts").collect()]

    # 8 moving samples then still: commit span 7 min; STOP once silent for longer.
    assert states(moving + [(70, 93 + i) for i in range(1, 4)])[8:] == ["OK", "OK", "OK"]
    longer = states(moving + [(70, 93 + i) for i in range(1, 10)])
    assert longer[-1] == "STOP" and "STOP" not in longer[:12]


def test_islands_break_on_state_changes_and_missing_cycles(spark: Any) -> None:
    from pyspark.sql import functions as F

    minutes = [0, 1, 2, 4, 5, 6]  # minute 3 missing
    states = [1, 1, 2, 2, 2, 1]
    rows = [("c", "g", T0 + dt.timedelta(minutes=m), 60_000, s) for m, s in
            zip(minutes, states, strict=True)]
    df = spark.createDataFrame(rows, ["cluster", "group", "ts", "interval_ms", "s"])
    got = [r["episode"] for r in
           episodes.islands(df, ["cluster", "group"], F.col("s")).orderBy("ts").collect()]
    assert got == [1, 1, 2, 3, 3, 4]
