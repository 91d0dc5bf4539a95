"""Scheduled lag reports: cron expressions (cronsim), the crontab line and systemd units for
hosts that prefer the system's scheduler, and the scheduler the lag monitor runs.

How this works: `ReportDuty` is one of the lag collector's duties (it runs after each
cycle, in its own task, skipped while its previous run is still going).  When the cron
expression (UTC) has matched since it last looked, it runs ``mqadmin report lag`` as a
child process (Spark gets its own JVM and memory; the collector keeps sampling), retries a
failed run once, and posts a ``report_ready`` (or ``report_failed``) event to the
collector's webhooks.  A match that falls while a report is running is skipped, and
``report lag`` itself refuses to start while any other report holds the lock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mqadmin.exit_codes import UsageProblem
from mqadmin.reports.period import yesterday

log = logging.getLogger(__name__)
_DOW = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def parse_cron(expr: str) -> str:
    """`expr` checked by cronsim (5 fields, UTC); returns it stripped.

    Raises:
        UsageProblem: not a cron expression cronsim accepts.
    """
    from cronsim import CronSim, CronSimError

    text = " ".join(expr.split())
    try:
        CronSim(text, dt.datetime.now(dt.UTC))
    except CronSimError as exc:
        raise UsageProblem(f"bad cron expression {expr!r}: {exc}. Write five fields, minute "
                           "hour day-of-month month day-of-week, e.g. \"0 6 * * *\" for "
                           "06:00 UTC daily.") from None
    return text


def next_times(expr: str, after: dt.datetime, count: int = 1) -> list[dt.datetime]:
    """The next `count` times (UTC) after `after` that `expr` matches."""
    from cronsim import CronSim

    it = CronSim(expr, after.astimezone(dt.UTC))
    return [next(it) for _ in range(count)]


def _field(value: str, names: Sequence[str] = ()) -> str:
    """A cron field in systemd's calendar syntax (lists, ranges a..b, steps a/s)."""
    parts = []
    for part in value.split(","):
        if part == "*":
            parts.append("*")
            continue
        base, _, step = part.partition("/")
        if base == "*":
            base = "0" if not names else "Sun"
        if "-" in base:
            lo, hi = base.split("-", 1)
            text = f"{_name(lo, names)}..{_name(hi, names)}"
        else:
            text = _name(base, names)
        if step:
            if "-" in base or names:
                raise ValueError(part)
            text += f"/{int(step)}"
        parts.append(text)
    return ",".join(parts)


def _name(value: str, names: Sequence[str]) -> str:
    if not names:
        return f"{int(value):02d}"
    if value.isdigit():
        return names[int(value)]
    return value[:3].capitalize()


def on_calendar(expr: str) -> str:
    """systemd's ``OnCalendar=`` value for a plain 5-field cron expression (UTC).

    Raises:
        UsageProblem: a form systemd cannot say the same way (L, #, both day fields).
    """
    minute, hour, dom, month, dow = expr.split()
    if dom != "*" and dow != "*":
        raise UsageProblem("cron runs when the day of month OR the day of week matches, "
                           "systemd only when both do: write OnCalendar= by hand for this "
                           "expression.")
    try:
        days = "" if dow == "*" else _field(dow, _DOW) + " "
        return (f"{days}*-{_field(month)}-{_field(dom)} {_field(hour)}:{_field(minute)}:00 "
                "UTC")
    except (ValueError, IndexError):
        raise UsageProblem(f"{expr!r} has no plain systemd equivalent; write OnCalendar= by "
                           "hand (see `man systemd.time`).") from None


def mqadmin_command() -> list[str]:
    """This installation's mqadmin: the script beside the interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "mqadmin"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqadmin.app"]


def report_argv(period: str, extra: Sequence[str] = (), *, trigger: str = "schedule",
                attempt: int = 1) -> list[str]:
    """The command a schedule runs."""
    return [*mqadmin_command(), "report", "lag", "--period", period, "--trigger", trigger,
            "--attempt", str(attempt), "-o", "json", *extra]


def schedule_files(expr: str, period: str, command: str, home: str) -> dict[str, str]:
    """The crontab line and a systemd service/timer pair running `command`."""
    cal = on_calendar(expr)
    return {
        "crontab": ("# mqadmin lag report (times in UTC; cronie reads CRON_TZ, Debian's cron "
                    "uses the system's zone)\n"
                    f"CRON_TZ=UTC\n{expr} MQADMIN_HOME={shlex.quote(home)} {command}\n"),
        "mqadmin-lag-report.service": (
            "[Unit]\nDescription=mqadmin consumer-lag report\n\n[Service]\nType=oneshot\n"
            f"Environment=MQADMIN_HOME={home}\nExecStart={command}\n"),
        "mqadmin-lag-report.timer": (
            f"[Unit]\nDescription=mqadmin {period} consumer-lag report\n\n[Timer]\n"
            f"OnCalendar={cal}\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"),
    }


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one scheduled report ended (after its retry, if any)."""

    ok: bool
    attempts: int
    run: dict[str, Any] | None
    error: str


class EventSink(Protocol):
    """Where a duty's event goes: the lag collector (`LagCollector.post_event`)."""

    def post_event(self, kind: str, payload: Mapping[str, Any]) -> None: ...


class ReportDuty:
    """The monitor's duty (`LagCollector.add_duty`) running the report when `cron` has
    matched since the last cycle; see the module docstring.

    Args:
        cron: a 5-field cron expression, in UTC.
        period: daily or weekly.
        extra: more ``report lag`` options (the monitor's --input, say).
        argv: builds the command of an attempt (tests swap the report for a stand-in).
        clock: the current time (tests).
    """

    def __init__(self, cron: str, period: str = "daily", *, extra: Sequence[str] = (),
                 argv: Callable[[int], list[str]] | None = None,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.cron = parse_cron(cron)
        self.period = period
        self.argv = argv or (lambda attempt: report_argv(
            period, ["--date", yesterday(self.clock()), *extra], attempt=attempt))
        self.clock = clock
        self.due = next_times(self.cron, clock())[0]
        self.outcomes: list[Outcome] = []
        self.skipped = 0
        self._busy = False

    async def __call__(self, sink: EventSink, _cycle: object = None) -> None:
        """Run the report if it is due; the event goes to `sink`, the outcome to
        `outcomes`."""
        now = self.clock()
        if now < self.due:
            return
        self.due = next_times(self.cron, now)[0]
        if self._busy:  # the collector skips a running duty; this guards direct calls
            self.skipped += 1
            log.warning("scheduled report skipped: the previous one is still running")
            return
        self._busy = True
        try:
            outcome = await self.run_once()
        finally:
            self._busy = False
        kind, payload = event(outcome, self.period)
        sink.post_event(kind, payload)

    async def run_once(self) -> Outcome:
        """One scheduled report: up to two attempts."""
        outcome = Outcome(False, 0, None, "")
        for attempt in (1, 2):
            proc = await asyncio.create_subprocess_exec(
                *self.argv(attempt), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            if proc.returncode == 0:
                runs = json.loads(out.decode() or "[]")
                outcome = Outcome(True, attempt, runs[0] if runs else None, "")
                log.info("scheduled report ready: %s", outcome.run)
                break
            lines = err.decode(errors="replace").strip().splitlines()
            error = lines[-1] if lines else f"exit code {proc.returncode}"
            log.warning("scheduled report attempt %d failed: %s", attempt, error)
            outcome = Outcome(False, attempt, None, error)
            if "another report is running" in error:
                break  # not a failure of this report: do not run it twice
        self.outcomes.append(outcome)
        return outcome


def event(outcome: Outcome, period: str) -> tuple[str, dict[str, Any]]:
    """The webhook event kind (report_ready, report_failed) and payload for `outcome`."""
    kind = "report_ready" if outcome.ok else "report_failed"
    base: dict[str, Any] = {"period_kind": period, "attempts": outcome.attempts}
    run = outcome.run or {}
    if outcome.ok:
        out = run.get("out", "")
        base |= {"run": run.get("id"), "period": run.get("period"), "out": out,
                 "report": f"{out}/report.html" if out else None,
                 "groups": run.get("groups"), "groups_in_breach": run.get("groups_in_breach"),
                 "slo_minutes": run.get("slo_minutes"),
                 "top_offenders": run.get("top_offenders", [])}
    else:
        base["error"] = outcome.error
    return kind, base

