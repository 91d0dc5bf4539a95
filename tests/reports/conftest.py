"""One local[1] Spark session for the whole test session (stopped at its end), and the
report of a small generated history computed once and shared.

Under pytest-xdist the tests of this folder all run on one worker (tests/scheduling.py), so
the session starts once and the report is made once."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reports import lagdata

SLO_FILE = 'default = "5m"\n[groups]\nslo-hand = "30s"\n"group-1" = "20m"\n'

#: The tests' JVMs live for seconds on small data: the client compiler alone and one GC thread
#: start them in a fraction of the CPU time (the reports' results do not depend on it).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors need pyarrow
    session = (SparkSession.builder.master("local[1]").appName("mqadmin-report-tests")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.default.parallelism", "1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "512m")
               .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def hand_rows() -> list[lagdata.Row]:
    """Hand-made series with known breaches (see test_report.py for the expected values)."""
    base = lagdata.ms(lagdata.DAY + dt.timedelta(hours=10))
    rows = []
    # slo-hand, SLO 30 s, one sample a minute: breaches at minutes 2, 4, 7, 9; minute 5 is a
    # gap, minute 6 is missing, minute 8 has lag but an unknown time lag.
    values = {0: 0, 1: 10_000, 2: 31_000, 3: 30_000, 4: 45_000, 7: 60_000, 8: None,
              9: 90_000, 10: 5_000}
    for minute, lag_ms in values.items():
        lag = 0 if lag_ms == 0 else 7
        rows.append(lagdata.sample(base + minute * 60_000, "slo-hand", "orders", 0,
                                   100 + minute * 10, 100 + minute * 10 - lag, lag_ms))
    rows.append(lagdata.gap(base + 5 * 60_000, "slo-hand"))
    # slo-default, default SLO 5 min: 300,001 and 600,000 breach, 300,000 does not.
    for minute, lag_ms in enumerate((299_999, 300_000, 300_001, 600_000)):
        rows.append(lagdata.sample(base + minute * 60_000, "slo-default", "billing", 0,
                                   50 + minute, 40, lag_ms))
    # slo-fast: 10 s interval, seven samples above 5 min -> 70 s of breach.
    for i in range(12):
        rows.append(lagdata.sample(base + i * 10_000, "slo-fast", "clicks", 0, 1000 + i, 990,
                                   400_000 if i % 2 else 1_000, interval_ms=10_000))
    rows.append(lagdata.sample(base + 12 * 10_000, "slo-fast", "clicks", 0, 1013, 990,
                               500_000, interval_ms=10_000))
    return rows


def history_rows() -> list[lagdata.Row]:
    """Two days of a random history (the day before is the trend's baseline) plus the
    hand-made series."""
    start = lagdata.DAY - dt.timedelta(days=1)
    return lagdata.random_history(7, start, 2 * 144, groups=3, interval_ms=600_000) \
        + hand_rows()


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[lagdata.Row]]:
    root = tmp_path_factory.mktemp("history") / "lag-history"
    rows = history_rows()
    lagdata.write(rows, root)
    # A partition outside the periods that Spark cannot read: the report must never open it.
    bad = root / "date=2026-10-01"
    bad.mkdir()
    (bad / "part-0.parquet").write_bytes(b"not parquet")
    return root, rows


@pytest.fixture(scope="session")
def report_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An mqadmin home for the whole session (the report runs are recorded there)."""
    home = tmp_path_factory.mktemp("mqadmin-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MQADMIN_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def report(spark: Any, history: tuple[Path, list[lagdata.Row]], report_home: Path
           ) -> tuple[Path, dict[str, Any]]:
    """The daily report of 2026-11-23 over `history`, with the SLO file above, made by
    ``mqadmin report lag`` in this process (it reuses the session's Spark)."""
    from tests.mqadmin.cli import invoke

    slo_path = report_home / "slo.toml"
    slo_path.write_text(SLO_FILE)
    result = invoke("report", "lag", "--input", str(history[0]), "--date", "2026-11-23",
                    "--slo", str(slo_path), "-o", "json")
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)[0]
    out = Path(run["out"])
    return out, json.loads((out / "summary.json").read_text())
