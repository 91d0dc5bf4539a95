"""``mqadmin report lag|list|show|schedule``: consumer-lag reports on Spark and their runs."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path
from typing import Annotated

import typer

from mqadmin import render, report_runs
from mqadmin.commands import guarded
from mqadmin.exit_codes import UsageProblem
from mqadmin.home import home as mqadmin_home
from mqadmin.operations.report import run as ops
from mqadmin.operations.report import schedule as sched
from mqadmin.options import DebugOpt, OutputOpt
from mqadmin.render import OutputFormat

app = typer.Typer(help="Consumer-lag reports computed with Spark over the lag history.",
                  no_args_is_help=True)

PeriodOpt = Annotated[str, typer.Option(
    "--period", help="daily (one UTC day) or weekly (the 7 days ending with --date).")]
RESULT_COLUMNS = ("id", "status", "period", "duration_s", "groups", "groups_in_breach",
                  "slo_minutes", "out")


@app.command("lag")
def report_lag(
    period: PeriodOpt = "daily",
    date: Annotated[str | None, typer.Option(
        "--date", help="The (last) day: YYYY-MM-DD, yesterday or today (default: today so "
                       "far, UTC).")] = None,
    start: Annotated[str | None, typer.Option(
        "--from", help="Start of an explicit range (ISO 8601, UTC unless zoned).")] = None,
    end: Annotated[str | None, typer.Option("--to", help="End of the range (exclusive).")]
    = None,
    input_path: Annotated[str | None, typer.Option(
        "--input", help="The lag history (folder or hdfs://, s3a:// URI; default: "
                        "$MQADMIN_HOME/lag-history).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Output folder (default: $MQADMIN_HOME/reports/<run>).")] = None,
    master: Annotated[str | None, typer.Option(
        "--master", help="Spark master: local[*] (default), local[N] or spark://HOST:PORT.")]
    = None,
    slo: Annotated[Path | None, typer.Option(
        "--slo", help="SLO file (TOML; default: $MQADMIN_HOME/report-slo.toml if present, "
                      "else 5 min for every group).")] = None,
    window: Annotated[int, typer.Option("--window", help="Samples per verdict window.")] = 10,
    trigger: Annotated[str, typer.Option(
        "--trigger", hidden=True, help="Who started it: manual or schedule.")] = "manual",
    attempt: Annotated[int, typer.Option(
        "--attempt", hidden=True, help="Attempt number of a scheduled run.")] = 1,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Compute the consumer-lag report of a period with Spark: report.html, charts and
    summary.parquet/csv/json in its own folder; progress on stderr, the run on stdout."""
    with guarded(debug):
        req = ops.ReportRequest(period, date, start, end, input_path, out, master, slo, window,
                                trigger, attempt, spark_logs=debug)
        run = ops.run_lag_report(req, render.note)
        render.render([run], output, columns=RESULT_COLUMNS)
        render.note(f"report: {Path(run['out']) / 'report.html'}")


@app.command("list")
def report_list(
    limit: Annotated[int, typer.Option("--limit", min=1, help="Newest runs to show.")] = 20,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List past report runs (status, period, duration, output), oldest first."""
    with guarded(debug):
        render.render(report_runs.records(limit=limit), output,
                      columns=report_runs.LIST_COLUMNS)


@app.command("show")
def report_show(
    run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `report list`).")],
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """One run in full: period, input, master, output folder, headline figures, error."""
    with guarded(debug):
        render.render([ops.show(run_id)], output, columns=report_runs.DETAIL_COLUMNS,
                      vertical=True)


@app.command("bundle")
def report_bundle(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the bundle into.")],
    master: Annotated[str, typer.Option(
        "--master", help="The cluster's master, for the printed command.")]
    = "spark://HOST:7077",
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Write the report job for `spark-submit` on a cluster (mqadmin-reports.zip and
    submit.py: nothing else of mqadmin is needed there) and print the command to run."""
    with guarded(debug):
        from mqadmin.reports import bundle

        archive, entry = bundle.bundle(out)
        command = shlex.join(bundle.submit_command(archive, entry, master, [
            "--input", "hdfs:///mqadmin/lag-history", "--out", "report", "--period", "daily",
            "--date", "yesterday"]))
        render.render([{"zip": str(archive), "entry": str(entry), "command": command}], output,
                      columns=("zip", "entry", "command"), vertical=True)
@app.command("schedule")
def report_schedule(
    cron: Annotated[str, typer.Option("--cron", metavar="EXPR",
                                      help="Cron expression in UTC, e.g. \"0 6 * * *\".")],
    period: PeriodOpt = "daily",
    print_files: Annotated[bool, typer.Option(
        "--print", help="Print the crontab line and the systemd service and timer.")] = False,
    write: Annotated[Path | None, typer.Option(
        "--write", metavar="DIR", help="Write them into DIR instead.")] = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Run the report from the system's scheduler: prints (or writes) a crontab line and a
    systemd timer/service pair that run `mqadmin report lag` (-o json: the same as rows).
    To let the lag monitor run it instead, start it with `mqadmin lag collect --report
    EXPR`."""
    with guarded(debug):
        if not print_files and write is None:
            raise UsageProblem("add --print to see the crontab line and systemd units, or "
                               "--write DIR to save them (mqadmin edits no system file).")
        if period not in ("daily", "weekly"):
            raise UsageProblem(f"unknown period {period!r}: use daily or weekly.")
        expr = sched.parse_cron(cron)
        command = shlex.join([*sched.mqadmin_command(), "report", "lag", "--period", period,
                              "--date", "yesterday", "--trigger", "schedule"])
        files = sched.schedule_files(expr, period, command, str(mqadmin_home()))
        upcoming = ", ".join(t.strftime("%Y-%m-%d %H:%M UTC")
                             for t in sched.next_times(expr, dt.datetime.now(dt.UTC), 3))
        if write is not None:
            write.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (write / name).write_text(text, encoding="utf-8")
            render.note(f"wrote {', '.join(files)} into {write}")
        elif output is OutputFormat.TABLE:  # the files as they are, to copy and paste
            for name, text in files.items():
                typer.echo(f"# --- {name} ---\n{text}")
        else:
            render.render([{"file": n, "text": t} for n, t in files.items()], output,
                          columns=("file", "text"))
        render.note(f"next runs: {upcoming}")
