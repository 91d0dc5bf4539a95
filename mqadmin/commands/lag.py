"""``mqadmin lag collect | status | watch``: the consumer-lag monitor and its views."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.remoting import loop
from mqadmin import config, render
from mqadmin.commands import endpoint, guarded
from mqadmin.exit_codes import ServersFailed, UsageProblem
from mqadmin.home import home as mqadmin_home
from mqadmin.operations.lag import status as st
from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.verdict import (
    COMMIT_INTERVAL_MS,
    DEFAULT_ALLOWED_LAG,
    DEFAULT_WINDOW,
)
from mqadmin.operations.report.schedule import ReportDuty
from mqadmin.options import (
    AllContextsOpt,
    ContextOpt,
    ContextsOpt,
    DebugOpt,
    NamesrvOpt,
    OutputOpt,
)
from mqadmin.render import OutputFormat
from mqadmin.reports.contract import DIR_NAME

if TYPE_CHECKING:
    from mqadmin.operations.lag.metrics import MetricsServer

app = typer.Typer(help="Consumer lag: a monitor with history, verdicts, forecasts and "
                       "retention risk.", no_args_is_help=True)

LOG_FILE = "lag-collect.log"
COLLECT_COLUMNS = ("cluster", "cycles", "groups", "queues", "historyFiles",
                   "eventsDelivered", "eventsFailed", "log")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")

GroupOpt = Annotated[str | None, typer.Option("-g", "--group", help="Only this group.")]
WindowOpt = Annotated[int, typer.Option(
    "--window", min=2, max=60, help="Samples a verdict looks at (Burrow's window).")]
AllowedOpt = Annotated[int, typer.Option(
    "--allowed-lag", min=0, help="Lag (messages) at or below which a queue is OK.")]
ViewAllowedOpt = Annotated[int | None, typer.Option(
    "--allowed-lag", min=0, help="Lag (messages) at or below which a queue is OK (default: "
                                 "the collector's, else 0).")]
IntervalOpt = Annotated[str, typer.Option(
    "--interval", metavar="DURATION", help="Sampling interval: 500ms, 10s, 1m, 1h.")]


def parse_duration(text: str) -> int:
    """``500ms`` / ``10s`` / ``1m`` / ``1h`` in milliseconds.

    Raises:
        UsageProblem: anything else, or under 100 ms.
    """
    m = _DURATION.match(text)
    if m is None:
        raise UsageProblem(f"--interval {text!r} is not a duration: write it as 500ms, 10s, "
                           "1m or 1h.")
    ms = int(float(m.group(1)) * _UNITS[m.group(2)])
    if ms < 100:
        raise UsageProblem(f"--interval {text!r} is too short: 100ms at least.")
    return ms


def check_webhook(url: str) -> str:
    """An absolute http(s) URL.

    Raises:
        UsageProblem: anything else.
    """
    import httpx  # only `lag collect --webhook` needs it: not at every command's start-up

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageProblem(f"--webhook {url!r} is not an http(s) URL: write it as "
                           "https://host/path.")
    return url


def _setup_log(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


async def run_collector(collector: LagCollector) -> None:
    """Run until SIGTERM or SIGINT, then stop after the current cycle."""
    done = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, done.set)
    try:
        await collector.start_collecting()
        await done.wait()
        logging.getLogger("mqadmin.lag").info("signal received: finishing the cycle")
    finally:
        await collector.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.remove_signal_handler(sig)


@app.command("collect")
def collect(
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    interval: IntervalOpt = "10s",
    webhook: Annotated[list[str] | None, typer.Option(
        "--webhook", metavar="URL", help="POST alerts here (repeatable).")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="Where the Parquet history and the log go (default: mqadmin's "
                           "home, $MQADMIN_HOME).")] = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="Name the samples are kept under (default: the context name, else "
                       "the name-server list).")] = None,
    window: WindowOpt = DEFAULT_WINDOW,
    allowed_lag: AllowedOpt = DEFAULT_ALLOWED_LAG,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", min=1, max=512, help="Requests in flight at once.")] = 32,
    log_file: Annotated[Path | None, typer.Option(
        "--log-file", help="Log here (default: DATA_DIR/logs/lag-collect.log).")] = None,
    report: Annotated[str | None, typer.Option(
        "--report", metavar="CRON", help="Also run `mqadmin report lag` when this cron "
                                         "expression (UTC) matches, e.g. \"0 6 * * *\"; "
                                         "report_ready goes to the webhooks.")] = None,
    report_period: Annotated[str, typer.Option(
        "--report-period", help="daily or weekly: the period of the scheduled report.")]
    = "daily",
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", metavar="PORT", min=0, max=65535,
        help="Serve /metrics for Prometheus on this port: rocketmq-exporter's metrics plus "
             "verdicts, time lag, ETAs, retention risk and dead letters (rocketmq_lag_*).")]
    = None,
    metrics_host: Annotated[str, typer.Option(
        "--metrics-host", metavar="HOST", help="Address /metrics listens on.")] = "0.0.0.0",
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Sample every consumer group's queues every interval until SIGTERM/Ctrl-C: the recent
    window goes to mqadmin's database (for `lag status`, `lag watch`, the dashboard), every
    sample to DATA_DIR/lag-history (Parquet, by date); verdict changes and retention risks
    are POSTed to each --webhook; with --metrics-port, Prometheus scrapes the latest cycle
    at /metrics (docs/monitoring.md).  At stop it prints what it did."""
    with guarded(debug):
        ms = parse_duration(interval)
        hooks = tuple(check_webhook(u) for u in webhook or ())
        where = endpoint(namesrv, context)
        root = (data_dir or mqadmin_home()).expanduser().resolve()
        duty = scheduled_report(report, report_period, root) if report is not None else None
        log_path = log_file or root / "logs" / LOG_FILE
        handler = _setup_log(log_path)
        cfg = CollectorConfig(tuple(where.addrs), name or where.cluster_key, ms, root, hooks,
                              window, allowed_lag, concurrency,
                              credentials=where.credentials,
                              exporter=metrics_port is not None,
                              ledger_scope=where.ledger_scope)
        render.note(f"collecting '{cfg.cluster}' every {interval}: window in "
                    f"{mqadmin_home() / 'mqadmin.db'}, history in {root / 'lag-history'}, "
                    f"log in {log_path}.  Stop with Ctrl-C or SIGTERM.")
        logging.getLogger("mqadmin.lag").info("collector for %s (%s) every %d ms, pid %d",
                                              cfg.cluster, where.text, ms, os.getpid())
        collector = LagCollector(cfg)
        if duty is not None:
            collector.add_duty("report", duty)
        server = (serve_metrics(collector, metrics_host, metrics_port)
                  if metrics_port is not None else None)
        try:
            loop.run(run_collector(collector))
        finally:
            if server is not None:
                server.stop()
            logging.getLogger().removeHandler(handler)
            handler.close()
        last = collector.last_cycle
        render.render([{"cluster": cfg.cluster, "cycles": collector.cycles,
                        "groups": len(last.groups) if last else 0,
                        "queues": len(last.samples) if last else 0,
                        "historyFiles": len(collector.history.files),
                        "eventsDelivered": collector.webhooks.delivered,
                        "eventsFailed": collector.webhooks.failed, "log": str(log_path)}],
                      output, columns=COLLECT_COLUMNS)


def serve_metrics(collector: LagCollector, host: str, port: int) -> MetricsServer:
    """/metrics of `collector`, listening now (stopped by the caller).

    Raises:
        UsageProblem: the port is taken or the host is not this machine's.
    """
    from mqadmin.operations.lag.metrics import MetricsServer

    server = MetricsServer(lambda: collector.latest, host, port)
    try:
        server.start()
    except OSError as exc:
        raise UsageProblem(f"--metrics-port {port} on {host}: {exc.strerror or exc}; pick "
                           "another port or stop what listens there.") from None
    render.note(f"metrics at {server.url}")
    logging.getLogger("mqadmin.lag").info("metrics at %s", server.url)
    return server


def scheduled_report(cron: str, period: str, root: Path) -> ReportDuty:
    """The collector's report duty over its own history (checks the options first)."""
    if period not in ("daily", "weekly"):
        raise UsageProblem(f"unknown --report-period {period!r}: use daily or weekly.")
    duty = ReportDuty(cron, period, extra=["--input", str(root / DIR_NAME)])
    render.note(f"scheduled {period} report at '{duty.cron}' (UTC), next at "
                f"{duty.due:%Y-%m-%d %H:%M} UTC")
    return duty


async def _report_of(where: config.Endpoint, group: str | None, window: int,
                     allowed_lag: int | None) -> st.LagReport:
    """The collector's window of the cluster, else a quick sampling of it.

    Raises:
        UnreachableError: no collector's window, and no name server of it answers.
    """
    keys = where.lag_keys
    for key in keys:
        found = st.report_from_window(key, group=group, window=window,
                                      allowed_lag=allowed_lag)
        if found is not None:
            return found
    async with MQAdmin(where.addrs, credentials=where.credentials) as admin:
        await admin.namesrv.cluster_info()  # raises when no name server answers
        return await st.sample_report(admin, keys[0], group=group, window=window,
                                      allowed_lag=allowed_lag or DEFAULT_ALLOWED_LAG,
                                      min_span_ms=COMMIT_INTERVAL_MS)


async def _reports(clusters: list[config.Endpoint], group: str | None, window: int,
                   allowed_lag: int | None) -> list[st.LagReport | ClientError]:
    """Every cluster's report, read at once; a cluster that fails gives its error."""
    async def one(where: config.Endpoint) -> st.LagReport | ClientError:
        try:
            return await _report_of(where, group, window, allowed_lag)
        except ClientError as exc:
            return exc

    return list(await asyncio.gather(*(one(w) for w in clusters)))


def _fleet_status(clusters: list[config.Endpoint], group: str | None, window: int,
                  allowed_lag: int | None, queues: bool, output: OutputFormat) -> None:
    """`lag status` over several clusters: their rows with a leading cluster column."""
    found = loop.run_once(_reports(clusters, group, window, allowed_lag))
    rows: list[dict[str, object]] = []
    failed: list[tuple[str, ClientError]] = []
    for where, report in zip(clusters, found, strict=True):
        name = where.context or where.text
        if isinstance(report, ClientError):
            failed.append((name, report))
            continue
        listed = st.queue_rows(report) if queues else st.group_rows(report)
        rows.extend({"cluster": name, **row} for row in listed)
        source = "collector" if report.source == "collector" else "quick sampling"
        render.note(f"{name}: {len(report.groups)} group(s) from the {source}"
                    + (f"; {report.gaps} gap(s) in the last cycle" if report.gaps else ""))
    columns = ("cluster", *(st.QUEUE_COLUMNS if queues else st.GROUP_COLUMNS))
    render.render(rows, output, columns=columns)
    if failed:
        raise ServersFailed("lag status", failed, len(clusters), noun="clusters")


@app.command("status")
def status(
    group: GroupOpt = None,
    window: WindowOpt = DEFAULT_WINDOW,
    allowed_lag: ViewAllowedOpt = None,
    queues: Annotated[bool, typer.Option("--queues", help="One row per queue.")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextsOpt = None,
    all_contexts: AllContextsOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Each group's verdict (Burrow's rules: STOP, REWIND, STALL, WARNING, OK), the rule
    that fired, lag in messages (of it, ready and in flight: taken by POP consumers, not
    acked yet) and time, net drain rate, catch-up ETA and retention risk; from a running
    collector's window, else from three samples taken half a second apart.  With several
    clusters (--context repeated, or --all-contexts) every cluster's rows, with a leading
    cluster column; clusters that do not answer are named on stderr (exit code 6)."""
    with guarded(debug):
        clusters = config.resolve_many(namesrv, context or [], all_contexts)
        if len(clusters) > 1:
            _fleet_status(clusters, group, window, allowed_lag, queues, output)
            return
        report = loop.run_once(_report_of(clusters[0], group, window, allowed_lag))
        if group is not None and not report.groups:
            raise UsageProblem(f"no samples of group '{group}': check the name with "
                               "`mqadmin consumerProgress`.")
        if queues:
            render.render(st.queue_rows(report), output, columns=st.QUEUE_COLUMNS)
        else:
            render.render(st.group_rows(report), output, columns=st.GROUP_COLUMNS)
        source = ("the collector's window" if report.source == "collector"
                  else "a quick sampling (no collector runs for this cluster)")
        render.note(f"{len(report.groups)} group(s) of '{report.cluster}' from {source}"
                    + (f"; {report.gaps} gap(s) in the last cycle" if report.gaps else ""))


@app.command("watch")
def watch(
    group: GroupOpt = None,
    window: WindowOpt = DEFAULT_WINDOW,
    allowed_lag: ViewAllowedOpt = None,
    interval: Annotated[str | None, typer.Option(
        "--interval", metavar="DURATION",
        help="Refresh period (default: the collector's interval, else 2s).")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """A live table of every group, worst first, with sparklines of lag over the window,
    refreshed every interval until Ctrl-C (with -o json or csv: the rows of each refresh,
    one document after the other)."""
    from mqadmin.commands.lag_watch import run_watch

    with guarded(debug):
        every = parse_duration(interval) / 1000 if interval else None
        where = endpoint(namesrv, context)
        try:
            loop.run(run_watch(where, where.lag_keys, group=group,
                               window=window, allowed_lag=allowed_lag, every=every,
                               stream=sys.stdout, output=output))
        except KeyboardInterrupt:
            return  # Ctrl-C is how a watch ends
