"""`mqadmin report lag|list|show|schedule` as an operator runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqadmin import report_runs
from tests.mqadmin.cli import invoke
from tests.reports import lagdata

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)


def run(*args: str) -> Any:
    return invoke(*args)


def test_the_run_is_recorded(report: tuple[Path, dict[str, Any]], report_home: Path) -> None:
    out, doc = report
    assert out.parent == report_home / "reports"
    runs = json.loads(run("report", "list", "-o", "json").stdout)
    mine = [r for r in runs if r["out"] == str(out)]
    assert len(mine) == 1 and mine[0]["status"] == "ok" and mine[0]["period"] == "2026-11-23"
    shown = run("report", "show", str(mine[0]["id"]), "-o", "json")
    detail = json.loads(shown.stdout)[0]
    assert detail["groups"] == doc["totals"]["groups"]
    assert detail["top_offenders"] == [t["group"] for t in doc["top_offenders"]]
    assert detail["trigger"] == "manual" and detail["duration_s"] > 0


def test_missing_run_and_bad_options(report_home: Path, tmp_path: Path) -> None:
    missing = run("report", "show", "999")
    assert missing.exit_code == 3 and "report list" in missing.stderr
    no_input = run("report", "lag", "--input", str(tmp_path / "none"))
    assert no_input.exit_code == 3 and "mqadmin lag collect" in no_input.stderr
    bad = run("report", "lag", "--period", "monthly", "--input", str(tmp_path))
    assert bad.exit_code == 2 and "daily or weekly" in bad.stderr
    half = run("report", "lag", "--from", "2026-11-23", "--input", str(tmp_path))
    assert half.exit_code == 2 and "--from and --to" in half.stderr
    slo = tmp_path / "slo.toml"
    slo.write_text('default = "soon"\n')
    bad_slo = run("report", "lag", "--slo", str(slo), "--input", str(tmp_path))
    assert bad_slo.exit_code == 2 and "500ms, 30s, 5m" in bad_slo.stderr


def test_a_second_report_waits_for_none(report_home: Path, tmp_path: Path) -> None:
    with report_runs.exclusive():
        busy = run("report", "lag", "--input", str(tmp_path), "--date", "2026-11-23")
    assert busy.exit_code == 1 and "another report is running" in busy.stderr


def test_an_empty_period_fails_cleanly(spark: Any, history: tuple[Path, Any],
                                       report_home: Path) -> None:
    result = run("report", "lag", "--input", str(history[0]), "--date", "2026-10-15")
    assert result.exit_code == 3 and "no lag samples" in result.stderr
    runs = json.loads(run("report", "list", "-o", "json").stdout)
    assert runs[-1]["status"] == "failed"


def test_schedule_prints_crontab_and_systemd_units(report_home: Path, tmp_path: Path) -> None:
    result = run("report", "schedule", "--cron", "30 6 * * 1-5", "--period", "weekly",
                 "--print")
    assert result.exit_code == 0
    assert "30 6 * * 1-5 MQADMIN_HOME=" in result.stdout
    assert "report lag --period weekly --date yesterday --trigger schedule" in result.stdout
    assert "OnCalendar=Mon..Fri *-*-* 06:30:00 UTC" in result.stdout
    assert "next runs:" in result.stderr
    written = run("report", "schedule", "--cron", "0 6 * * *", "--write", str(tmp_path))
    assert written.exit_code == 0
    assert (tmp_path / "mqadmin-lag-report.timer").read_text().count("OnCalendar=*-*-* "
                                                                       "06:00:00 UTC") == 1
    bad = run("report", "schedule", "--cron", "61 * * * *", "--print")
    assert bad.exit_code == 2 and "bad cron expression" in bad.stderr
    both = run("report", "schedule", "--cron", "0 6 1 * 1", "--print")
    assert both.exit_code == 2 and "OnCalendar= by hand" in both.stderr


@pytest.mark.parametrize("expr", ["0 6 * * *", "*/15 * * * *", "0 0 1 1 *"])
def test_cron_next_times(expr: str) -> None:
    import datetime as dt

    from mqadmin.operations.report.schedule import next_times

    after = dt.datetime(2026, 11, 24, 5, 59, tzinfo=dt.UTC)
    first, second = next_times(expr, after, 2)
    assert after < first < second


def test_bundle_prints_the_spark_submit_command(report_home: Path, tmp_path: Path) -> None:
    result = run("report", "bundle", "--out", str(tmp_path), "--master", "spark://h:7077",
                 "-o", "json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)[0]
    assert Path(row["zip"]).is_file() and Path(row["entry"]).is_file()
    assert row["command"].startswith("spark-submit --master spark://h:7077 --py-files ")


def test_spark_keeps_quiet_without_debug(report_home: Path, tmp_path: Path) -> None:
    """A report in a fresh process: its progress on stderr, and not one line of Spark's or
    the JVM's own below ERROR (hostname, native-hadoop, log4j profile, default level)."""
    rows = [lagdata.sample(lagdata.ms(lagdata.DAY) + i * 60_000, "g", "t", 0, 100 + i, 90,
                           4_000) for i in range(5)]
    root = lagdata.write(rows, tmp_path / "lag-history")
    env = dict(os.environ, MQADMIN_HOME=str(report_home))
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from mqadmin.app import main; sys.exit(main())",
         "report", "lag", "--input", str(root), "--date", "2026-11-23", "--master",
         "local[1]", "--out", str(tmp_path / "out"), "-o", "json"],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any("starting Spark" in line for line in lines)
    assert any("report ready" in line for line in lines)
    noise = [line for line in lines if not line.startswith(("run ", "[", "report: "))]
    assert noise == [], done.stderr
