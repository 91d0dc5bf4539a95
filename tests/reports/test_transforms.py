"""The transforms on tiny DataFrames built here: gaps and islands (conventions: pure
DataFrame -> DataFrame, tested in isolation; the verdict rules are held to the table of
rule cases in test_rules.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mqadmin.reports import episodes

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)

T0 = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


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
