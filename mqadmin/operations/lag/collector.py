"""The lag collector: a Service that samples a cluster every interval and keeps the results.

How this works: each cycle samples every group (sample), forecasts retention risks for
the lagging queues (retention), stores the cycle in the admin database's window
(window) and in the Parquet history (history), judges every group (verdict)
and posts an event to the webhooks when a group's verdict changes or a retention risk
appears (alerts).  Then it starts its extra duties (`add_duty`: e.g. a scheduled
report), each in its own task so a slow one never delays sampling.  With /metrics served
(`exporter`), each cycle is kept as `latest`, which the scrape reads (metrics), and a
duty reads the brokers, the groups' consumers and the dead letters (extras) after each
cycle: `latest` carries the last of those reads.  Cycles keep their
cadence: the wait after a cycle is the interval minus the time it took.  Nothing that goes
wrong in a cycle stops the loop: name servers or brokers that do not answer are gaps, and
a cycle that fails as a whole is logged and retried next interval.  `stop()` lets the
current cycle finish, flushes the history and delivers the queued events.  A restarted
collector resumes from the window (previous offsets for rates, the verdicts it last
alerted with).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.client.admin import MQAdmin
from engine.common.service import Service
from engine.protocol.signature import Credentials
from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.alerts import Webhooks
from mqadmin.operations.lag.extras import Extras, Latest, read_extras
from mqadmin.operations.lag.history import HistoryWriter
from mqadmin.operations.lag.model import Cycle, QueueKey, QueueSample, Series
from mqadmin.operations.lag.retention import RetentionForecaster, Risk
from mqadmin.operations.lag.sample import CONCURRENCY, Errors, Sampler, now_ms
from mqadmin.operations.lag.status import LagReport, build_report
from mqadmin.operations.lag.verdict import DEFAULT_ALLOWED_LAG, DEFAULT_WINDOW, eta_text
from mqadmin.operations.targets import masters
from mqadmin.reports.contract import DIR_NAME, GroupStatus

log = logging.getLogger("mqadmin.lag")

#: A duty runs after a cycle: ``await duty(collector, cycle)``.
Duty = Callable[["LagCollector", Cycle], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CollectorConfig:
    """What `mqadmin lag collect` was asked to do."""

    namesrv: tuple[str, ...]
    cluster: str  # the context name, or the name-server list
    interval_ms: int = 10_000
    data_dir: Path = field(default_factory=Path)  # the Parquet history goes under it
    webhooks: tuple[str, ...] = ()
    window: int = DEFAULT_WINDOW
    allowed_lag: int = DEFAULT_ALLOWED_LAG
    concurrency: int = CONCURRENCY
    db_path: Path | None = None  # the admin database (mqadmin's home by default)
    flush_cycles: int = 30
    credentials: Credentials | None = field(default=None, repr=False)  # signs requests
    exporter: bool = False  # /metrics is served: read the brokers, consumers, dead letters
    ledger_scope: str | None = None  # the dead-letter ledger the exporter counts handled by


class LagCollector(Service):
    """``c = LagCollector(config); await c.start(); ...; await c.stop()``."""

    name = "lag-collector"

    def __init__(self, config: CollectorConfig, *,
                 clock: Callable[[], int] = now_ms) -> None:
        super().__init__(config.interval_ms / 1000)
        self.config = config
        self.clock = clock
        self.pid = os.getpid()
        self.sampler = Sampler(config.cluster, config.interval_ms,
                               concurrency=config.concurrency, clock=clock)
        self.forecaster = RetentionForecaster()
        self.webhooks = Webhooks(config.webhooks)
        self.history = HistoryWriter(config.data_dir / DIR_NAME, started_ms=clock(),
                                     pid=self.pid, flush_cycles=config.flush_cycles)
        self.window: dict[QueueKey, deque[QueueSample]] = {}
        self.alerted: dict[str, tuple[str, bool]] = {}
        self.report: LagReport | None = None
        self.cycles = 0
        self.last_cycle: Cycle | None = None
        self.latest: Latest | None = None  # what /metrics reads (one assignment per cycle)
        self.extras = Extras()  # the metrics duty's last reads
        self._waiters: list[asyncio.Future[Cycle]] = []
        self._duties: list[tuple[str, Duty]] = []
        self._running: dict[str, asyncio.Task[None]] = {}
        self._admin: MQAdmin | None = None
        if config.exporter:
            self.add_duty("metrics-reads", self._read_extras)

    # ------------------------------------------------------------------ extension points

    def add_duty(self, name: str, duty: Duty) -> None:
        """Run `duty(collector, cycle)` after every cycle, in its own task (skipped while
        its previous run is still going); its errors are logged, never fatal."""
        self._duties.append((name, duty))

    def post_event(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Queue ``{"event": kind, "cluster": ..., "ts": ..., **payload}`` for every
        webhook (returns at once; delivery is retried in the background)."""
        self.webhooks.submit({"event": kind, "cluster": self.config.cluster,
                              "ts": self.clock(), **payload})

    async def next_cycle(self) -> Cycle:
        """Wait for the end of the next cycle; returns it."""
        waiter: asyncio.Future[Cycle] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    async def settle(self) -> None:
        """Wait for the duties still running (started after the last cycles)."""
        if self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    # ------------------------------------------------------------------ life cycle

    async def open(self) -> None:
        """Resume from the window and connect, without starting the loop (then `cycle()`
        runs one cycle by hand; `close()` ends)."""
        await asyncio.to_thread(self._resume)
        self._admin = MQAdmin(list(self.config.namesrv), credentials=self.config.credentials)
        self.webhooks.start()

    async def start_collecting(self) -> None:
        """`open()`, then start the loop (its first cycle at once)."""
        await self.open()
        self.start()
        self.wakeup()

    async def close(self) -> None:
        """What `stop()` does after the loop: duties finished, history flushed, queued
        events delivered, connections closed."""
        await self.on_stop()

    def _resume(self) -> None:
        db = win.open_db(self.config.db_path)
        try:
            series = win.read_window(db, self.config.cluster, cycles_back=self.config.window)
            self.alerted = win.load_state(db, self.config.cluster)
        finally:
            db.close()
        for s in series:
            self.window[s.key] = deque(s.samples, maxlen=self.config.window)
        self.sampler.seed(s.last for s in series)

    async def on_stop(self) -> None:
        await self.settle()
        files = await asyncio.to_thread(self.history.flush)
        for f in files:
            log.info("history: wrote %s", f)
        await self.webhooks.stop()
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        log.info("stopped after %d cycles", self.cycles)

    # ------------------------------------------------------------------ one cycle

    async def run_once(self) -> None:
        started = self.clock()
        try:
            await self.cycle()
        finally:
            elapsed = (self.clock() - started) / 1000
            self.interval = max(self.config.interval_ms / 1000 - elapsed, 0.0)

    async def cycle(self) -> Cycle:
        """Sample, forecast, store, judge, alert, run the duties; returns the cycle."""
        assert self._admin is not None, "open() or start_collecting() first"
        admin = self._admin
        cycle = await self.sampler.sample(admin)
        if cycle.error:
            log.warning("cycle at %d: %s (%d gap rows)", cycle.ts, cycle.error,
                        len(cycle.gaps))
        risks: dict[QueueKey, Risk] = {}
        if cycle.samples:
            for s in cycle.samples:
                self.window.setdefault(s.key, deque(maxlen=self.config.window)).append(s)
            risks = await self._forecast(admin, cycle)
            if risks:
                samples = tuple(replace(s, retention_risk=True,
                                        risk_messages=risks[s.key].messages)
                                if s.key in risks else s for s in cycle.samples)
                cycle = replace(cycle, samples=samples)
                for s in samples:
                    if s.key in risks:
                        self.window[s.key][-1] = s
        self._forget_vanished(cycle)
        await asyncio.to_thread(self._store, cycle, list(risks.values()))
        written = await asyncio.to_thread(self.history.add, cycle)
        for f in written:
            log.info("history: wrote %s", f)
        self.report = build_report(
            self.config.cluster, [Series(k, tuple(v)) for k, v in self.window.items()],
            list(risks.values()), source="collector", ts=cycle.ts,
            interval_ms=self.config.interval_ms, window=self.config.window,
            allowed_lag=self.config.allowed_lag, gaps=len(cycle.gaps))
        await self._alert(self.report, cycle.ts)
        self.cycles += 1
        self.last_cycle = cycle
        if self.config.exporter:
            self.latest = Latest(cycle, self.report, self.extras, self.cycles,
                                 self.config.allowed_lag)
        log.info("cycle %d: %d groups, %d queues, %d gaps, %d risks, %.0f ms", self.cycles,
                 len(cycle.groups), len(cycle.samples), len(cycle.gaps), len(risks),
                 cycle.duration_ms)
        self._run_duties(cycle)
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(cycle)
        return cycle

    async def _forecast(self, admin: MQAdmin, cycle: Cycle) -> dict[QueueKey, Risk]:
        lagging = [Series(s.key, tuple(self.window[s.key])) for s in cycle.samples
                   if s.lag > 0 and s.oldest_phys is not None]
        if not lagging:
            return {}
        try:
            brokers = await masters(admin, or_slave=True)
            return await self.forecaster.forecast(admin, lagging, brokers, cycle.ts)
        except Errors as exc:
            log.warning("retention forecast skipped: %s", exc)
            return {}

    async def _read_extras(self, _: LagCollector, cycle: Cycle) -> None:
        """The metrics duty: the brokers, consumers and dead letters, then `latest` with
        them (a duty, so these reads never lengthen the cycle)."""
        assert self._admin is not None
        try:
            self.extras = await read_extras(self._admin, cycle, self.config.ledger_scope,
                                            self.config.concurrency)
        except Errors as exc:
            log.warning("metrics: brokers, consumers and dead letters not read: %s", exc)
            return
        if self.latest is not None:
            self.latest = replace(self.latest, extras=self.extras)

    def _forget_vanished(self, cycle: Cycle) -> None:
        """Drop series of queues not sampled for a whole window (deleted groups)."""
        horizon = cycle.ts - self.config.window * self.config.interval_ms * 2
        for key in [k for k, v in self.window.items() if v[-1].ts < horizon]:
            del self.window[key]

    def _store(self, cycle: Cycle, risks: list[Risk]) -> None:
        db = win.open_db(self.config.db_path)
        try:
            win.save_cycle(db, cycle, pid=self.pid, allowed_lag=self.config.allowed_lag)
            win.save_risks(db, self.config.cluster, cycle.ts, risks)
        finally:
            db.close()

    async def _alert(self, report: LagReport, ts: int) -> None:
        changed: list[tuple[str, str, bool]] = []
        for g in report.groups:
            status, risky = g.verdict.status.value, bool(g.risks)
            before = self.alerted.get(g.group)
            old_status, old_risky = before if before is not None else (None, False)
            if status != old_status and status != GroupStatus.UNKNOWN.value and not (
                    old_status in (None, GroupStatus.UNKNOWN.value)
                    and status == GroupStatus.OK.value):
                v = g.verdict
                self.post_event("verdict_changed", {
                    "group": g.group, "from": old_status, "to": status,
                    "rule": f"{v.worst.status.value}: {v.worst.rule}" if v.worst else "",
                    "lag": v.lag, "lag_ms": v.lag_ms, "drain_rate": v.drain_rate,
                    "eta": eta_text(v.eta_s, v.keeping_up), "ready": v.ready,
                    "in_flight": v.in_flight})
            if risky and not old_risky:
                first = min(g.risks, key=lambda r: r.deletes_at_ms)
                self.post_event("retention_risk", {
                    "group": g.group, "messages": g.risk_messages,
                    "deletes_at": first.deletes_at_ms, "text": g.risk_text(ts),
                    "queues": [list(r.key) for r in g.risks]})
            if (status, risky) != before:
                self.alerted[g.group] = (status, risky)
                changed.append((g.group, status, risky))
        if changed:
            await asyncio.to_thread(self._save_state, ts, changed)

    def _save_state(self, ts: int, changed: list[tuple[str, str, bool]]) -> None:
        db = win.open_db(self.config.db_path)
        try:
            win.save_state(db, self.config.cluster, ts, changed)
        finally:
            db.close()

    def _run_duties(self, cycle: Cycle) -> None:
        for name, duty in self._duties:
            task = self._running.get(name)
            if task is not None and not task.done():
                log.info("duty %s still running: skipped after cycle %d", name, self.cycles)
                continue
            self._running[name] = asyncio.get_running_loop().create_task(
                self._duty(name, duty, cycle), name=f"duty-{name}")

    async def _duty(self, name: str, duty: Duty, cycle: Cycle) -> None:
        try:
            await duty(self, cycle)
        except Exception:
            log.exception("duty %s failed", name)
