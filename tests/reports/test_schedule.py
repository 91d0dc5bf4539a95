"""The monitor's report scheduler: one run at a time, one retry, the webhook event (a real
local HTTP server), with stand-in commands for the report so no JVM starts here."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mqadmin.operations import report_schedule as sched


class Hooks(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    arrived: threading.Event

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()
        type(self).arrived.set()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[Hooks]]]:
    handler = type("H", (Hooks,), {"received": [], "arrived": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", handler
    server.shutdown()
    server.server_close()
    thread.join()


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


async def test_retries_once_then_posts_report_ready(tmp_path: Path, webhook: Any) -> None:
    url, hooks = webhook
    s = sched.ReportScheduler("0 6 * * *", notify=sched.webhook_notifier([url]),
                              argv=stand_in(tmp_path, fail_first=1))
    outcome = await s.run_once()
    assert (outcome.ok, outcome.attempts) == (True, 2)
    assert hooks.received == [{**hooks.received[0], "event": "report_ready", "run": 7,
                               "report": "/r/7/report.html", "top_offenders": ["slow"],
                               "attempts": 2}]


async def test_two_failures_post_report_failed(tmp_path: Path, webhook: Any) -> None:
    url, hooks = webhook
    s = sched.ReportScheduler("0 6 * * *", notify=sched.webhook_notifier([url]),
                              argv=stand_in(tmp_path, fail_first=2))
    outcome = await s.run_once()
    assert (outcome.ok, outcome.attempts) == (False, 2)
    assert hooks.received[0]["event"] == "report_failed"
    assert hooks.received[0]["error"] == "mqadmin: error: spark died"


async def test_never_two_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = tmp_path / "slow.py"
    script.write_text("import os, sys, time\n"
                      f"fifo = {str(gate)!r}\n"
                      "open(fifo).read()\n"  # blocks until the test writes the gate
                      "print('[]')\n")
    import os

    os.mkfifo(gate)
    s = sched.ReportScheduler("0 6 * * *", argv=lambda attempt: [sys.executable, str(script)])
    first = s.fire()
    assert first is not None
    assert s.fire() is None and s.skipped == 1
    await asyncio.to_thread(lambda: Path(gate).write_text("go"))
    outcome = await first
    assert outcome.ok and outcome.attempts == 1
    assert s.fire() is not None  # free again once the first finished
    await asyncio.to_thread(lambda: Path(gate).write_text("go"))
    await s.stop()


async def test_the_loop_fires_when_the_cron_matches(tmp_path: Path) -> None:
    done = asyncio.Event()
    events: list[dict[str, Any]] = []

    async def notify(event: dict[str, Any]) -> None:
        events.append(event)
        done.set()

    now = dt.datetime.now(dt.UTC)
    # The next minute boundary is at most 60 s away: pretend it is 1 ms away.
    next_minute = sched.next_times("* * * * *", now)[0]
    s = sched.ReportScheduler("* * * * *", notify=notify, argv=stand_in(tmp_path, 0),
                              clock=lambda: next_minute - dt.timedelta(milliseconds=1))
    s.start()
    await asyncio.wait_for(done.wait(), 30)
    await s.stop()
    assert events[0]["event"] == "report_ready"


def test_bad_cron_is_a_usage_error() -> None:
    from mqadmin.exit_codes import UsageProblem

    with pytest.raises(UsageProblem, match="bad cron expression"):
        sched.ReportScheduler("every day")
