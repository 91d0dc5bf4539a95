"""The monitor's report duty: due times, one retry, one run at a time, the events; stand-in
commands replace the report so no JVM starts here (the collector test in tests/lag posts
through real webhooks)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mqadmin.operations.report import schedule as sched

T0 = dt.datetime(2026, 11, 24, 5, 59, tzinfo=dt.UTC)


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def post_event(self, kind: str, payload: Mapping[str, Any]) -> None:
        self.events.append((kind, dict(payload)))


def stand_in(tmp_path: Path, fail_first: int) -> Any:
    """A command that fails its first `fail_first` attempts, then prints a run as JSON."""
    script = tmp_path / "report.py"
    script.write_text(
        "import json, sys\n"
        "attempt = int(sys.argv[1])\n"
        f"if attempt <= {fail_first}:\n"
        "    print('mqadmin: error: spark died', file=sys.stderr); sys.exit(1)\n"
        "print(json.dumps([{'id': 7, 'period': '2026-11-23', 'out': '/r/7', 'groups': 3,\n"
        "                   'groups_in_breach': 1, 'slo_minutes': 4.0,\n"
        "                   'top_offenders': ['slow']}]))\n")
    return lambda attempt: [sys.executable, str(script), str(attempt)]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


async def test_runs_when_due_retries_once_and_posts_report_ready(tmp_path: Path) -> None:
    clock, sink = Clock(), Sink()
    duty = sched.ReportDuty("0 6 * * *", argv=stand_in(tmp_path, fail_first=1), clock=clock)
    assert duty.due == dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)
    await duty(sink)
    assert sink.events == [] and duty.outcomes == []  # 05:59: not yet
    clock.now = T0 + dt.timedelta(minutes=1, seconds=5)
    await duty(sink)
    assert [(o.ok, o.attempts) for o in duty.outcomes] == [(True, 2)]
    kind, payload = sink.events[0]
    assert kind == "report_ready"
    assert payload | {"run": 7, "report": "/r/7/report.html", "top_offenders": ["slow"],
                      "attempts": 2, "period_kind": "daily"} == payload
    assert duty.due == dt.datetime(2026, 11, 25, 6, 0, tzinfo=dt.UTC)
    await duty(sink)
    assert len(duty.outcomes) == 1  # once a day


async def test_two_failures_post_report_failed(tmp_path: Path) -> None:
    clock, sink = Clock(), Sink()
    duty = sched.ReportDuty("0 6 * * *", argv=stand_in(tmp_path, fail_first=2), clock=clock)
    clock.now += dt.timedelta(hours=1)
    await duty(sink)
    assert [(o.ok, o.attempts) for o in duty.outcomes] == [(False, 2)]
    assert sink.events == [("report_failed", {"period_kind": "daily", "attempts": 2,
                                              "error": "mqadmin: error: spark died"})]


async def test_never_two_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    script = tmp_path / "slow.py"
    script.write_text(f"open({str(gate)!r}).read()\nprint('[]')\n")  # waits for the gate
    clock, sink = Clock(), Sink()
    duty = sched.ReportDuty("* * * * *", argv=lambda attempt: [sys.executable, str(script)],
                            clock=clock)
    clock.now += dt.timedelta(minutes=2)
    first = asyncio.create_task(duty(sink))
    while not duty._busy:
        await asyncio.sleep(0)
    clock.now += dt.timedelta(minutes=2)
    await duty(sink)
    assert duty.skipped == 1
    await asyncio.to_thread(gate.write_text, "go")
    await first
    assert [o.ok for o in duty.outcomes] == [True]
    assert [k for k, _ in sink.events] == ["report_ready"]


def test_bad_cron_is_a_usage_error() -> None:
    from mqadmin.exit_codes import UsageProblem

    with pytest.raises(UsageProblem, match="bad cron expression"):
        sched.ReportDuty("every day")
