"""The report job: read the history, compute every figure with Spark, write the outputs.

Run it through ``mqadmin report lag``, or ship it alone with
``spark-submit --py-files mqadmin-reports.zip job.py --input URI --out DIR`` (bundle.py
builds the zip).  Only aggregated rows leave Spark (per group, per topic, per hour,
episodes); the outputs are written by the driver.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
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


def session(master: str | None, app_name: str = "mqadmin-lag-report") -> SparkSession:
    """The active session, or a new one on `master` configured for small aggregates."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name) \
        .config("spark.sql.session.timeZone", "UTC") \
        .config("spark.ui.showConsoleProgress", "false") \
        .config("spark.sql.adaptive.enabled", "true")
    if master:
        builder = builder.master(master)
    if master is None or master.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "8") \
            .config("spark.driver.memory", "2g") \
            .config("spark.driver.extraJavaOptions", os.environ.get(
                "MQADMIN_REPORT_JAVA_OPTS", "-XX:+UseParallelGC -XX:TieredStopAtLevel=1")) \
            .config("spark.driver.host", "127.0.0.1") \
            .config("spark.driver.bindAddress", "127.0.0.1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    """Collect a small aggregate, timestamps as epoch milliseconds (no local-time surprise)."""
    cols = [F.unix_millis(F.col(name)).alias(name) if kind == "timestamp" else F.col(name)
            for name, kind in df.dtypes]
    return [r.asDict(recursive=True) for r in df.select(*cols).collect()]


def _topic_rows(topics: DataFrame, group_rows: list[dict[str, Any]],
                slo: Callable[[DataFrame], DataFrame]) -> list[dict[str, Any]]:
    """The figures per (cluster, group, topic).  A group that consumed one topic in the
    period (the usual case) has its topic's cycles equal to its own, so its topic row is
    its group row; Spark computes only the groups of several topics."""
    topic_of: dict[tuple[str, str], list[str]] = {}
    for r in _rows(topics.select("cluster", "group", "topic").distinct()):
        topic_of.setdefault((r["cluster"], r["group"]), []).append(r["topic"])
    out = [{**g, "topic": topic_of[(g["cluster"], g["group"])][0]} for g in group_rows
           if len(topic_of.get((g["cluster"], g["group"]), ())) == 1]
    several = [key for key, names in topic_of.items() if len(names) > 1]
    if several:
        spark = topics.sparkSession
        wanted = spark.createDataFrame(several, "cluster string, `group` string")
        out += _rows(figures.series_figures(
            slo(topics.join(F.broadcast(wanted), ["cluster", "group"], "left_semi")),
            ["cluster", "group", "topic"]))
    return out


def compute(spark: SparkSession, opts: Options, progress: Progress) -> dict[str, Any]:
    """summary.json's document for `opts` (plus ``_timeline`` rows for the chart).

    Raises:
        dataset.DatasetError: the input is no lag history.
        ReportError: no samples in the period.
    """
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    period, previous = opts.period, opts.period.previous()
    progress(f"reading {opts.input} (partitions {period.dates()[0]}..{period.dates()[-1]} "
             "and the previous period's), one pass for every figure")
    context = Period(period.kind, period.start - VERDICT_CONTEXT, period.end)
    rows = dataset.read(spark, opts.input, [previous, context])
    slo_map = dict(opts.slo.groups)

    def slo(df: DataFrame) -> DataFrame:
        return dataset.with_slo(df, opts.slo.default_ms, slo_map)

    all_cycles = dataset.cycles(rows).cache()  # both periods: the one pass over the samples
    topics = dataset.in_period(dataset.topic_cycles(all_cycles), period)
    groups = slo(dataset.group_cycles(topics)).cache()
    progress("computing figures per group and topic")
    gaps = dataset.in_period(dataset.gap_cycles(all_cycles), period)
    group_rows = _rows(figures.group_figures(groups, gaps, period.end_ms - period.start_ms))
    if not any(g["samples"] for g in group_rows):
        all_cycles.unpersist()
        groups.unpersist()
        raise ReportError(f"no lag samples in {period.label} in {opts.input}: check "
                          "--input and the period (the monitor writes date=YYYY-MM-DD "
                          "folders; list them to see which days exist)")
    progress("figures per topic")
    topic_rows = _topic_rows(topics, group_rows, slo)
    progress("the previous period's figures (trend)")
    prev_groups = slo(dataset.group_cycles(
        dataset.in_period(dataset.topic_cycles(all_cycles), previous)))
    previous_rows = _rows(figures.trend_figures(prev_groups, ["cluster", "group"]))
    all_cycles.unpersist()
    progress("worst hours and heat map")
    hour_rows = _rows(figures.worst_hours(groups))
    heat_rows = _rows(figures.heatmap(groups))
    progress(f"verdicts over windows of {opts.window} samples, episodes")
    verdicts = episodes.queue_verdicts(
        episodes.lagging_groups(dataset.in_period(rows, context)), opts.window)
    states = dataset.in_period(episodes.group_states(verdicts, opts.window), period).cache()
    state_rows = _rows(episodes.state_time(states))
    progress("verdict episodes")
    episode_rows = _rows(episodes.verdict_episodes(states))
    states.unpersist()
    progress("retention-risk episodes")
    risk_rows = _rows(episodes.risk_episodes(groups))
    doc = summary.build(
        period, inputs=opts.input, window=opts.window,
        slo={"default_ms": opts.slo.default_ms, "groups": slo_map},
        groups=group_rows, topics=topic_rows, previous=previous_rows, hours=hour_rows,
        states=state_rows, episodes=episode_rows, risks=risk_rows, heat=heat_rows)
    worst = doc["top_offenders"] or sorted(doc["groups"],
                                           key=lambda g: -(g["lag_ms_p95"] or 0))
    top = [(g["cluster"], g["group"]) for g in worst[:TIMELINE_GROUPS]]
    bucket = max(60_000, (period.end_ms - period.start_ms) // TIMELINE_POINTS)
    doc["_timeline"] = _rows(figures.timeline(groups, top, bucket)) if opts.charts else []
    groups.unpersist()
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
        note: Progress = lambda _m: None) -> list[Path]:
    """One report: a Spark session (reused when one is active, stopped only when made
    here), `compute`, `write_outputs`; returns the files written."""
    started = time.monotonic()
    def progress(message: str) -> None:
        note(f"[{time.monotonic() - started:6.1f} s] {message}")

    made = SparkSession.getActiveSession() is None
    if made:
        progress(f"starting Spark ({master or 'local[*]'})")
    spark = session(master)
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
