"""Running a lag report for the CLI and the monitor: defaults under mqadmin's home, the
lock, the run record, and the Spark job itself (mqadmin.reports, in this process)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqadmin import report_runs
from mqadmin.exit_codes import CliError, TargetNotFound, UsageProblem
from mqadmin.home import home as mqadmin_home
from mqadmin.reports.contract import DIR_NAME

SLO_FILE = "report-slo.toml"
HISTORY_DIR = DIR_NAME


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """What `mqadmin report lag` was asked for (None: the default)."""

    period: str = "daily"
    date: str | None = None
    start: str | None = None
    end: str | None = None
    input: str | None = None
    out: Path | None = None
    master: str | None = None
    slo: Path | None = None
    window: int = 10
    trigger: str = "manual"
    attempt: int = 1
    spark_logs: bool = False  # --debug: Spark's own logging, else errors only


def default_input() -> str:
    """The monitor's history under mqadmin's home, else that of the `mqadmin dev up`
    cluster of the current folder (its collector writes under the dev data dir)."""
    from mqadmin.dev.cluster import DEFAULT_DATA_DIR

    home = mqadmin_home() / HISTORY_DIR
    dev = Path(DEFAULT_DATA_DIR).resolve() / HISTORY_DIR
    return str(dev if not home.exists() and dev.exists() else home)


def _folder_name(run_id: int, kind: str, label: str) -> str:
    return f"{run_id:05d}-{kind}-" + re.sub(r"[^0-9A-Za-z_-]+", "_", label).strip("_")


def run_lag_report(req: ReportRequest, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run one report under the lock, recorded in the runs table; returns its run record.

    Raises:
        UsageProblem: a bad period, SLO file or window.
        TargetNotFound: the input does not exist or holds no samples for the period.
        report_runs.ReportBusy: another report is running.
        CliError: Spark failed (the message says why).
    """
    from mqadmin.reports import dataset, job, period, slo

    try:
        span = period.resolve(req.period, date=req.date, start=req.start, end=req.end)
        slo_path = req.slo
        if slo_path is None and (mqadmin_home() / SLO_FILE).exists():
            slo_path = mqadmin_home() / SLO_FILE
        slos = slo.load(slo_path)
    except (period.PeriodError, slo.SloError) as exc:
        raise UsageProblem(f"{exc}.") from None
    if req.window < 2:
        raise UsageProblem("--window must be at least 2 samples.")
    source = req.input or default_input()
    if "://" not in source and not Path(source).exists():
        raise TargetNotFound(f"no lag history at {source}: a running monitor writes it after "
                             "its first cycle, so retry in one interval; else start the "
                             "monitor (`mqadmin lag collect`, or `mqadmin dev up` here) or "
                             "pass --input PATH (local, hdfs://, s3a://).")
    with report_runs.exclusive():
        run_id = report_runs.start(kind=span.kind, period=span.label,
                                   period_from=period.iso(span.start),
                                   period_to=period.iso(span.end), trigger=req.trigger,
                                   attempt=req.attempt, master=req.master or "local[*]",
                                   input_path=source)
        out = req.out or report_runs.reports_dir() / _folder_name(run_id, span.kind, span.label)
        progress(f"run {run_id}: {span.kind} report for {span.label} (UTC) of {source} "
                 f"into {out}")
        started = time.monotonic()
        opts = job.Options(source, out, span, slos, req.window)
        try:
            job.run(opts, req.master or "local[*]", progress, spark_logs=req.spark_logs)
        except (job.ReportError, dataset.DatasetError) as exc:
            report_runs.finish(run_id, status="failed", duration_s=time.monotonic() - started,
                               error=str(exc))
            raise TargetNotFound(str(exc)) from None
        except BaseException as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            report_runs.finish(run_id, status="failed", duration_s=time.monotonic() - started,
                               error=text)
            if isinstance(exc, Exception):
                raise CliError(f"the report failed: {text}. Re-run with --debug for the "
                               "Spark error; `mqadmin report show "
                               f"{run_id}` keeps the record.") from exc
            raise
        import json

        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        report_runs.finish(run_id, status="ok", duration_s=time.monotonic() - started,
                           out=str(out), summary=summary)
    return report_runs.records(run_id=run_id)[0]


def show(run_id: int) -> dict[str, Any]:
    """The run record of `run_id`.

    Raises:
        TargetNotFound: no such run.
    """
    rows = report_runs.records(run_id=run_id)
    if not rows:
        raise TargetNotFound(f"no report run {run_id}; list them with `mqadmin report list`.")
    return rows[0]
