"""`lag collect --report`: the collector runs the report duty after a cycle and posts
report_ready to a real webhook (a stand-in command replaces the Spark report)."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from pathlib import Path

from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.report.schedule import ReportDuty
from tests.lag.conftest import Lab
from tests.lag.webhook_server import WebhookServer


async def test_the_collector_runs_the_scheduled_report(lab: Lab, tmp_path: Path) -> None:
    await lab.group("g1", "T1")
    script = tmp_path / "report.py"
    script.write_text("import json\n"
                      "print(json.dumps([{'id': 3, 'out': '/r/3', 'period': '2026-11-23'}]))\n")
    start = dt.datetime(2026, 11, 24, 5, 59, 59, tzinfo=dt.UTC)
    ticks = iter([start] + [start + dt.timedelta(seconds=2)] * 1000)
    history = str(tmp_path / "data" / "lag-history")
    duty = ReportDuty("0 6 * * *", clock=lambda: next(ticks),
                      argv=lambda attempt: [sys.executable, str(script), "--input", history])
    with WebhookServer() as hook:
        cfg = CollectorConfig((lab.ns,), "test", 200, tmp_path / "data", (hook.url,))
        collector = LagCollector(cfg)
        collector.add_duty("report", duty)
        await collector.start_collecting()
        try:
            event = await asyncio.to_thread(hook.take, "report_ready")
        finally:
            await collector.stop()
    assert event["run"] == 3 and event["report"] == "/r/3/report.html"
    assert event["cluster"] == "test" and event["attempts"] == 1
    assert len(duty.outcomes) == 1  # due once: later cycles did not run it again
