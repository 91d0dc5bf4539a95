"""What `lag status`, `lag watch` and the dashboard show: verdicts, ETAs, retention risks and
sparklines per group, from the collector's window or from a quick sampling.

How this works: when a collector for the cluster wrote a cycle recently (within three of
its intervals) its window in the admin database is judged as it stands, with the
retention forecasts it saved; otherwise the cluster is sampled a few times here, half a
second apart, and forecast once.  Either way the result is a `LagReport` of frozen
values, and `group_rows` / `queue_rows` turn it into the rows the CLI renders: the lag and,
of it, the messages ready (not taken yet) and in flight (taken by POP consumers, not acked
yet; 0 for push and pull groups).
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.client.admin.cluster import MQAdmin
from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.model import QueueKey, QueueSample, Series
from mqadmin.operations.lag.retention import RetentionForecaster, Risk
from mqadmin.operations.lag.sample import Errors, Known, Sampler, now_ms
from mqadmin.operations.lag.verdict import (
    DEFAULT_ALLOWED_LAG,
    DEFAULT_WINDOW,
    GroupVerdict,
    eta_text,
    judge,
)
from mqadmin.operations.targets import masters
from mqadmin.reports.contract import SEVERITY, format_duration
from mqadmin.sparkline import sparkline

Row = dict[str, Any]
GROUP_COLUMNS = ("group", "verdict", "rule", "lag", "ready", "inFlight", "lagTime",
                 "drainRate", "eta", "retentionRisk", "trend")
QUEUE_COLUMNS = ("group", "topic", "broker", "queueId", "verdict", "rule", "lag", "ready",
                 "inFlight", "lagMs", "drainRate", "eta", "riskMessages", "risk")
SPARK_FLOOR = 10
#: A collector's window is used when its last cycle is this many intervals old at most.
FRESH_INTERVALS = 3.0
QUICK_SAMPLES = 3
QUICK_SPACING = 0.5


@dataclass(frozen=True, slots=True)
class GroupReport:
    verdict: GroupVerdict
    risks: tuple[Risk, ...]
    lags: tuple[int, ...]  # the group's total lag per sample time, oldest first

    @property
    def group(self) -> str:
        return self.verdict.group

    @property
    def risk_messages(self) -> int:
        return sum(r.messages for r in self.risks)

    def risk_text(self, now: int) -> str:
        """One line for the group ("" without risk)."""
        if not self.risks:
            return ""
        first = min(self.risks, key=lambda r: r.deletes_at_ms)
        worst = max(self.risks, key=lambda r: (r.speedup or float("inf")))
        total = Risk(first.key, first.deletes_at_ms, first.segment,
                     sum(r.at_risk for r in self.risks), self.risk_messages,
                     worst.consume_rate, worst.needed_rate)
        return f"{self.group} {total.text(now)}"


@dataclass(frozen=True, slots=True)
class LagReport:
    cluster: str
    source: str  # "collector" (its window) or "sampled" (a quick sampling here)
    ts: int  # ms, the newest sample
    interval_ms: int
    groups: tuple[GroupReport, ...]
    gaps: int = 0


def build_report(cluster: str, series: Sequence[Series], risks: Sequence[Risk], *,
                 source: str, ts: int, interval_ms: int, window: int = DEFAULT_WINDOW,
                 allowed_lag: int = DEFAULT_ALLOWED_LAG, gaps: int = 0,
                 min_span_ms: int = 0) -> LagReport:
    """Judge `series` (their last `window` samples; see `queue_verdict` for `min_span_ms`)
    and attach risks and sparklines."""
    by_key: dict[QueueKey, Risk] = {r.key: r for r in risks}
    totals: dict[str, dict[int, int]] = {}
    for s in series:
        per_ts = totals.setdefault(s.key[0], {})
        for sample in s.samples[-window:]:
            per_ts[sample.ts] = per_ts.get(sample.ts, 0) + sample.lag
    groups = tuple(
        GroupReport(v, tuple(by_key[q.key] for q in v.queues if q.key in by_key),
                    tuple(lag for _, lag in sorted(totals.get(v.group, {}).items())))
        for v in judge(series, allowed_lag, window, min_span_ms))
    return LagReport(cluster, source, ts, interval_ms, groups, gaps)


def report_from_window(cluster: str, *, group: str | None = None,
                       window: int = DEFAULT_WINDOW, allowed_lag: int | None = None,
                       db_path: Path | None = None, now: int | None = None,
                       fresh_only: bool = True) -> LagReport | None:
    """The collector's view of the cluster (judged with the collector's allowed lag unless
    `allowed_lag` is given); None when no collector wrote a cycle lately (with
    `fresh_only`) or ever."""
    db = win.open_db(db_path)
    try:
        last = win.latest_cycle(db, cluster)
        if last is None:
            return None
        now = now_ms() if now is None else now
        if fresh_only and now - last.ts > FRESH_INTERVALS * last.interval_ms + 5000:
            return None
        series = win.read_window(db, cluster, group=group, cycles_back=window)
        risks = [r for r in win.read_risks(db, cluster) if group is None or r.key[0] == group]
        return build_report(cluster, series, risks, source="collector", ts=last.ts,
                            interval_ms=last.interval_ms, window=window,
                            allowed_lag=last.allowed_lag if allowed_lag is None else allowed_lag,
                            gaps=last.gaps)
    finally:
        db.close()


async def sample_report(admin: MQAdmin, cluster: str, *, group: str | None = None,
                        samples: int | None = None, spacing: float | None = None,
                        window: int = DEFAULT_WINDOW,
                        allowed_lag: int = DEFAULT_ALLOWED_LAG,
                        min_span_ms: int = 0) -> LagReport:
    """Sample the cluster `samples` times (`QUICK_SAMPLES`), `spacing` seconds apart
    (`QUICK_SPACING`, read at the call), and judge that (with `min_span_ms`, see
    `queue_verdict`: e.g. `COMMIT_INTERVAL_MS`, a stuck offset over less than a client's
    commit interval is UNKNOWN, not STALL)."""
    samples = QUICK_SAMPLES if samples is None else samples
    spacing = QUICK_SPACING if spacing is None else spacing
    sampler = Sampler(cluster, int(spacing * 1000))
    groups = [group] if group is not None else None
    found: dict[QueueKey, list[Any]] = {}
    gaps = 0
    for i in range(samples):
        if i:
            await asyncio.sleep(spacing)
        cycle = await sampler.sample(admin, groups)
        gaps = len(cycle.gaps)
        for s in cycle.samples:
            found.setdefault(s.key, []).append(s)
    series = [Series(k, tuple(v)) for k, v in found.items()]
    try:
        brokers = await masters(admin, or_slave=True)
        risks = list((await RetentionForecaster().forecast(admin, series, brokers,
                                                           now_ms())).values())
    except Errors:
        risks = []
    ts = max((s.last.ts for s in series), default=now_ms())
    return build_report(cluster, series, risks, source="sampled", ts=ts,
                        interval_ms=int(spacing * 1000), window=window,
                        allowed_lag=allowed_lag, gaps=gaps, min_span_ms=min_span_ms)


class KeptSampling:
    """A quick sampling kept between reads (the dashboard's refreshes, without a collector):
    the first read samples `samples` times, `spacing` seconds apart, as `sample_report`
    does; every later read samples once and judges it with the samples kept from the reads
    before (the last `window` of each queue).  The sampler's cache of oldest-message store
    times and the forecaster's of segment times are kept too: on a big cluster a refresh
    reads each group once, warm, instead of `samples` times from cold."""

    def __init__(self, cluster: str, *, samples: int | None = None,
                 spacing: float | None = None, window: int = DEFAULT_WINDOW,
                 allowed_lag: int = DEFAULT_ALLOWED_LAG, min_span_ms: int = 0) -> None:
        self.cluster = cluster
        self.samples = QUICK_SAMPLES if samples is None else samples
        self.spacing = QUICK_SPACING if spacing is None else spacing
        self.window = window
        self.allowed_lag = allowed_lag
        self.min_span_ms = min_span_ms
        self._sampler = Sampler(cluster, int(self.spacing * 1000))
        self._forecaster = RetentionForecaster()
        self._kept: dict[QueueKey, deque[QueueSample]] = {}
        self._times: deque[int] = deque(maxlen=window)

    async def report(self, admin: MQAdmin,
                     known: Callable[[], Awaitable[Known]] | None = None) -> LagReport:
        """Sample (once when samples are kept, else `samples` times) and judge; `known()`
        gives, for each sample, what the caller read already (see `Sampler.sample`)."""
        gaps = 0
        seen: set[QueueKey] = set()
        for i in range(1 if self._kept else self.samples):
            if i:
                await asyncio.sleep(self.spacing)
            cycle = await self._sampler.sample(
                admin, known=await known() if known is not None else None)
            gaps = len(cycle.gaps)
            self._times.append(cycle.ts)
            seen = set()
            for s in cycle.samples:
                self._kept.setdefault(s.key, deque(maxlen=self.window)).append(s)
                seen.add(s.key)
        for key in [k for k in self._kept if k not in seen]:  # gone, or not read this time
            del self._kept[key]
        series = [Series(k, tuple(v)) for k, v in self._kept.items()]
        try:
            brokers = await masters(admin, or_slave=True)
            risks = list((await self._forecaster.forecast(admin, series, brokers,
                                                          now_ms())).values())
        except Errors:
            risks = []
        spans = [b - a for a, b in itertools.pairwise(self._times)]
        interval = int(statistics.median(spans)) if spans else int(self.spacing * 1000)
        ts = max((s.last.ts for s in series), default=now_ms())
        return build_report(self.cluster, series, risks, source="sampled", ts=ts,
                            interval_ms=interval, window=self.window,
                            allowed_lag=self.allowed_lag, gaps=gaps,
                            min_span_ms=self.min_span_ms)


async def lag_report(admin: MQAdmin, cluster: str, *, group: str | None = None,
                     window: int = DEFAULT_WINDOW, allowed_lag: int | None = None,
                     db_path: Path | None = None) -> LagReport:
    """The collector's window when one runs for `cluster` (with its allowed lag unless
    `allowed_lag` is given), else a quick sampling."""
    report = await asyncio.to_thread(report_from_window, cluster, group=group, window=window,
                                     allowed_lag=allowed_lag, db_path=db_path)
    if report is not None:
        return report
    return await sample_report(
        admin, cluster, group=group, window=window,
        allowed_lag=DEFAULT_ALLOWED_LAG if allowed_lag is None else allowed_lag)


def _rate(value: float | None) -> float | None:
    return None if value is None else round(value, 2) + 0.0  # no -0.0


def group_rows(report: LagReport, now: int | None = None) -> list[Row]:
    """One row per group, worst first."""
    now = report.ts if now is None else now
    rows: list[Row] = []
    for g in report.groups:
        v = g.verdict
        rows.append({
            "group": v.group, "verdict": v.status.value,
            "rule": f"{v.worst.status.value}: {v.worst.rule}" if v.worst else "",
            "lag": v.lag, "ready": v.ready, "inFlight": v.in_flight,
            "lagTime": None if v.lag_ms is None else format_duration(v.lag_ms / 1000),
            "drainRate": _rate(v.drain_rate), "eta": eta_text(v.eta_s, v.keeping_up),
            "retentionRisk": g.risk_text(now) or None,
            "trend": sparkline(g.lags, width=None, floor=SPARK_FLOOR)})
    return rows


def queue_rows(report: LagReport, now: int | None = None) -> list[Row]:
    """One row per queue, worst group first, worst queue first within it."""
    now = report.ts if now is None else now
    rows: list[Row] = []
    for g in report.groups:
        risks = {r.key: r for r in g.risks}
        for q in sorted(g.verdict.queues, key=lambda q: (-SEVERITY[q.status], -q.lag)):
            risk = risks.get(q.key)
            rows.append({"group": q.key[0], "topic": q.key[1], "broker": q.key[2],
                         "queueId": q.key[3], "verdict": q.status.value, "rule": q.rule,
                         "lag": q.lag, "ready": q.ready, "inFlight": q.in_flight,
                         "lagMs": q.lag_ms, "drainRate": _rate(q.drain_rate),
                         "eta": eta_text(q.eta_s, q.keeping_up),
                         "riskMessages": risk.messages if risk else 0,
                         "risk": risk.text(now) if risk else None})
    return rows

