"""``mqadmin lag watch``: a live rich table of every group's verdict, worst first, with
sparklines; from the collector's window, or from sampling here when no collector runs."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from engine.client.admin import MQAdmin
from mqadmin import render
from mqadmin.config import Endpoint
from mqadmin.operations.lag import status as st
from mqadmin.operations.lag.model import QueueKey, QueueSample, Series
from mqadmin.operations.lag.retention import RetentionForecaster
from mqadmin.operations.lag.sample import Errors, Sampler
from mqadmin.operations.targets import masters
from mqadmin.render import OutputFormat
from mqadmin.reports.contract import format_duration

STYLES = {"ERROR": "bold red", "WARNING": "yellow", "OK": "green", "UNKNOWN": "dim"}
DEFAULT_EVERY = 2.0


def table(report: st.LagReport, source_note: str) -> Table:
    t = Table(title=f"consumer lag of '{report.cluster}' — {source_note}", title_justify="left",
              expand=False)
    for col in ("group", "verdict", "lag", "ready", "in flight", "lag time", "drain/s", "ETA",
                "trend", "rule", "retention risk"):
        t.add_column(col, overflow="fold", no_wrap=col in ("trend", "verdict"))
    for row in st.group_rows(report):
        style = STYLES.get(str(row["verdict"]), "")
        t.add_row(str(row["group"]), Text(str(row["verdict"]), style=style),
                  f"{row['lag']:,}", f"{row['ready']:,}", f"{row['inFlight']:,}",
                  str(row["lagTime"] or ""),
                  "" if row["drainRate"] is None else f"{round(row['drainRate'], 1) + 0.0:,.1f}",
                  str(row["eta"]), Text(str(row["trend"]), style=style),
                  str(row["rule"]), Text(str(row["retentionRisk"] or ""), style="red"))
    return t


class LocalSampling:
    """Samples here when no collector runs, keeping a window in memory."""

    def __init__(self, cluster: str, window: int, interval_ms: int) -> None:
        self.sampler = Sampler(cluster, interval_ms)
        self.window = window
        self.series: dict[QueueKey, collections.deque[QueueSample]] = {}
        self.forecaster = RetentionForecaster()

    async def report(self, admin: MQAdmin, group: str | None, allowed_lag: int
                     ) -> st.LagReport:
        cycle = await self.sampler.sample(admin, [group] if group else None)
        for s in cycle.samples:
            self.series.setdefault(s.key, collections.deque(maxlen=self.window)).append(s)
        series = [Series(k, tuple(v)) for k, v in self.series.items()]
        risks = []
        try:
            brokers = await masters(admin, or_slave=True)
            risks = list((await self.forecaster.forecast(admin, series, brokers,
                                                         cycle.ts)).values())
        except Errors:
            pass
        return st.build_report(self.sampler.cluster, series, risks, source="sampled",
                               ts=cycle.ts, interval_ms=self.sampler.interval_ms,
                               window=self.window, allowed_lag=allowed_lag,
                               gaps=len(cycle.gaps))


class Feed:
    """Reports one after the other: the collector's window, else sampling here."""

    def __init__(self, admin: MQAdmin, keys: Sequence[str], group: str | None, window: int,
                 allowed_lag: int | None, every: float | None) -> None:
        self.admin = admin
        self.keys = keys
        self.group = group
        self.window = window
        self.allowed_lag = allowed_lag
        self.every = every
        self.local: LocalSampling | None = None

    async def next(self) -> tuple[st.LagReport, float, str]:
        """The report, the seconds until the next one, and where it came from."""
        for key in self.keys:
            report = await asyncio.to_thread(st.report_from_window, key, group=self.group,
                                             window=self.window, allowed_lag=self.allowed_lag)
            if report is not None:
                every = format_duration(report.interval_ms / 1000)
                return report, self.every or report.interval_ms / 1000, f"collector, every {every}"
        period = self.every or DEFAULT_EVERY
        if self.local is None:
            self.local = LocalSampling(self.keys[0], self.window, int(period * 1000))
        report = await self.local.report(self.admin, self.group, self.allowed_lag or 0)
        return report, period, "sampled here (no collector runs)"


async def run_watch(where: Endpoint, keys: Sequence[str], *, group: str | None, window: int,
                    allowed_lag: int | None, every: float | None, stream: TextIO,
                    output: OutputFormat = OutputFormat.TABLE) -> None:
    """Refresh the table (or print the rows, for json and csv) until Ctrl-C."""
    async with MQAdmin(where.addrs, credentials=where.credentials) as admin:
        feed = Feed(admin, keys, group, window, allowed_lag, every)
        if output is not OutputFormat.TABLE:
            while True:
                report, period, _ = await feed.next()
                render.render(st.group_rows(report), output, columns=st.GROUP_COLUMNS,
                              stream=stream)
                await asyncio.sleep(period)
        with Live(console=Console(file=stream), auto_refresh=False) as live:
            while True:
                report, period, note = await feed.next()
                gaps = f", {report.gaps} gap(s)" if report.gaps else ""
                live.update(table(report, note + gaps + " — Ctrl-C to quit"), refresh=True)
                await asyncio.sleep(period)
