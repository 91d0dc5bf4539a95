"""The report job: read the history, compute every figure with Spark, write the outputs.

Run it through ``mqadmin report lag``, or ship it alone with
``spark-submit --py-files mqadmin-reports.zip job.py --input URI --out DIR`` (bundle.py
builds the zip).  Only aggregated rows leave Spark (per group, per topic, per hour,
episodes); the outputs are written by the driver.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import dataset, episodes, figures, summary
from .period import Period, PeriodError, resolve
from .session import session
from .slo import Slo, SloError, load

VERDICT_CONTEXT = dt.timedelta(hours=1)  # samples before the period that feed its windows
TIMELINE_GROUPS = 5
TIMELINE_POINTS = 288

Progress = Callable[[str], None]


class ReportError(Exception):
    """A report that cannot be made; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Options:
    """What one report run needs."""

    input: str
    out: Path
    period: Period
    slo: Slo = field(default_factory=Slo)
    window: int = episodes.WINDOW
    charts: bool = True


def input_bytes(opts: Options) -> int | None:
    """The size of the files of the report's date partitions (its period's and the
    previous one's) when the input is a local folder; None for other URIs."""
    if "://" in opts.input and not opts.input.startswith("file://"):
        return None
    root = Path(opts.input.removeprefix("file://"))
    dates = set(opts.period.dates()) | set(opts.period.previous().dates())
    total = 0
    for day in dates:
        folder = root / f"date={day}"
        if folder.is_dir():
            total += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return total


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    """Collect a small aggregate, timestamps as epoch milliseconds (no local-time surprise)."""
    cols = [F.unix_millis(F.col(name)).alias(name) if kind == "timestamp" else F.col(name)
            for name, kind in df.dtypes]
    return [r.asDict(recursive=True) for r in df.select(*cols).collect()]


def compute(spark: SparkSession, opts: Options, progress: Progress) -> dict[str, Any]:
    """summary.json's document for `opts` (plus ``_timeline`` rows for the chart).

    Two Spark jobs read the samples: one sums the queue rows into cycles and computes every
    figure per group from them (`figures.per_group`, both periods: the previous one gives
    the trend), one recomputes the verdicts with window functions for the groups that lag
    or are at risk in the period.

    Raises:
        dataset.DatasetError: the input is no lag history.
        ReportError: no samples in the period.
    """
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    period, previous = opts.period, opts.period.previous()
    progress(f"reading {opts.input} (partitions {period.dates()[0]}..{period.dates()[-1]} "
             "and the previous period's)")
    context = Period(period.kind, period.start - VERDICT_CONTEXT, period.end)
    rows = dataset.read(spark, opts.input, [previous, context])
    slo_map = dict(opts.slo.groups)
    bucket = max(60_000, (period.end_ms - period.start_ms) // TIMELINE_POINTS)
    spec = figures.Spec(period.start_ms, period.end_ms, previous.start_ms, previous.end_ms,
                        opts.slo.default_ms, slo_map, bucket)
    progress("figures per group and topic, the previous period's, worst hours, heat map")
    parts = figures.split(_rows(figures.per_group(dataset.cycles(rows), spec)))
    if not any(g["samples"] for g in parts["groups"]):
        raise ReportError(f"no lag samples in {period.label} in {opts.input}: check "
                          "--input and the period (the monitor writes date=YYYY-MM-DD "
                          "folders; list them to see which days exist)")
    progress(f"verdicts over windows of {opts.window} samples, episodes "
             f"({len(parts['lagging'])} groups lag, {len(parts['at_risk'])} at risk)")
    state_rows: list[dict[str, Any]] = []
    episode_rows: list[dict[str, Any]] = []
    risk_rows: list[dict[str, Any]] = []
    wanted = {(g["cluster"], g["group"]) for g in parts["lagging"] + parts["at_risk"]}
    if wanted:
        queues = dataset.of_groups(dataset.read(spark, opts.input, [context]), sorted(wanted))
        verdicts = episodes.queue_verdicts(queues, opts.window)
        states = dataset.in_period(episodes.group_states(verdicts, opts.window), period) \
            .drop("rule").cache()
        state_rows = _rows(episodes.state_time(states))
        progress("verdict episodes")
        episode_rows = _rows(episodes.verdict_episodes(states))
        if parts["at_risk"]:
            progress("retention-risk episodes")
            risk_rows = _rows(episodes.risk_episodes(
                dataset.of_groups(states, [(g["cluster"], g["group"])
                                           for g in parts["at_risk"]])))
        states.unpersist()
    doc = summary.build(
        period, inputs=opts.input, window=opts.window,
        slo={"default_ms": opts.slo.default_ms, "groups": slo_map},
        groups=parts["groups"], topics=parts["topics"], previous=parts["previous"],
        hours=parts["hours"], states=state_rows, episodes=episode_rows, risks=risk_rows,
        heat=parts["heat"])
    worst = doc["top_offenders"] or sorted(doc["groups"],
                                           key=lambda g: -(g["lag_ms_p95"] or 0))
    top = {(g["cluster"], g["group"]) for g in worst[:TIMELINE_GROUPS]}
    doc["_timeline"] = [r for r in parts["timeline"] if (r["cluster"], r["group"]) in top] \
        if opts.charts else []
    return doc


def write_outputs(doc: dict[str, Any], opts: Options, progress: Progress) -> list[Path]:
    """summary.*, the charts and report.html into `opts.out`; returns the files."""
    from . import charts, html

    opts.out.mkdir(parents=True, exist_ok=True)
    timeline = doc.pop("_timeline", [])
    files = summary.write(doc, opts.out)
    if opts.charts:
        progress("drawing charts")
        pngs = charts.draw_all(doc, timeline, opts.out)
        files += pngs
        files.append(html.write(doc, pngs, opts.out))
    return files


def run(opts: Options, master: str | None = None,
        note: Progress = lambda _m: None, spark_logs: bool = False) -> list[Path]:
    """One report: a Spark session (reused when one is active, stopped only when made
    here; `spark_logs`: Spark's own logging, else errors only), `compute`,
    `write_outputs`; returns the files written."""
    started = time.monotonic()
    def progress(message: str) -> None:
        note(f"[{time.monotonic() - started:6.1f} s] {message}")

    made = SparkSession.getActiveSession() is None
    if made:
        progress(f"starting Spark ({master or 'local[*]'})")
    spark = session(master, input_size=input_bytes(opts) if made else None,
                    spark_logs=spark_logs)
    try:
        doc = compute(spark, opts, progress)
    finally:
        if made:
            spark.stop()
    files = write_outputs(doc, opts, progress)
    progress(f"report ready: {opts.out}")
    return files


def parse_args(argv: list[str]) -> tuple[Options, str | None]:
    """The job's own command line (what spark-submit passes after the file)."""
    p = argparse.ArgumentParser(prog="job.py", description=__doc__)
    p.add_argument("--input", required=True, help="the lag-history folder or URI")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--period", default="daily", choices=("daily", "weekly"))
    p.add_argument("--date", help="the (last) UTC day: YYYY-MM-DD, yesterday, today "
                                  "(default: today so far)")
    p.add_argument("--from", dest="start", help="start (ISO 8601, UTC unless zoned)")
    p.add_argument("--to", dest="end", help="end, exclusive")
    p.add_argument("--slo", type=Path, help="SLO file (TOML); default 5 min for every group")
    p.add_argument("--window", type=int, default=episodes.WINDOW,
                   help="samples per verdict window")
    p.add_argument("--master", help="Spark master (spark-submit's --master wins)")
    p.add_argument("--no-charts", action="store_true", help="summary files only")
    a = p.parse_args(argv)
    try:
        period = resolve(a.period, date=a.date, start=a.start, end=a.end)
        slo = load(a.slo)
    except (PeriodError, SloError) as exc:
        p.error(str(exc))
    if a.window < 2:
        p.error("--window must be at least 2")
    return Options(a.input, Path(a.out), period, slo, a.window, not a.no_charts), a.master


def main(argv: list[str] | None = None) -> int:
    opts, master = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(opts, master, note=lambda m: print(m, file=sys.stderr, flush=True))
    except (ReportError, dataset.DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
