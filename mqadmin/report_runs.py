"""Report runs in the admin database (SQLite via sqlite-utils, beside the audit log), and the
lock that keeps two reports from running at once.

How this works: ``mqadmin report lag`` inserts a ``running`` row before Spark starts and
finishes it as ``ok`` or ``failed`` with the duration, the output folder and the headline
figures; a run killed half way stays ``running`` with its pid, and `records` shows it as
``died`` when that pid is gone.  The lock is an flock on ``reports/.lock`` under mqadmin's
home: the kernel drops it when the holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mqadmin import history
from mqadmin.exit_codes import CliError
from mqadmin.home import home

TABLE = "report_runs"
LIST_COLUMNS = ("id", "started", "status", "period", "trigger", "attempt", "duration_s",
                "groups_in_breach", "out")
DETAIL_COLUMNS = ("id", "started", "finished", "status", "kind", "period", "from", "to",
                  "trigger", "attempt", "master", "input", "out", "duration_s", "groups",
                  "groups_in_breach", "slo_minutes", "top_offenders", "error", "pid")


class ReportBusy(CliError):
    """Another report holds the lock."""


def reports_dir() -> Path:
    return home() / "reports"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _open() -> Any:
    return history.open_db(tables=_table)


def _table(db: Any) -> None:
    if TABLE not in db.table_names():
        db.table(TABLE).create({
            "id": int, "started": str, "finished": str, "status": str, "kind": str,
            "period": str, "period_from": str, "period_to": str, "trigger": str,
            "attempt": int, "master": str, "input": str, "out": str, "duration_s": float,
            "groups": int, "groups_in_breach": int, "slo_minutes": float,
            "top_offenders": str, "error": str, "pid": int,
        }, pk="id")


def start(*, kind: str, period: str, period_from: str, period_to: str, trigger: str,
          attempt: int, master: str, input_path: str) -> int:
    """Record a run as ``running``; returns its id."""
    db = _open()
    table = db.table(TABLE)
    table.insert({"started": _now(), "status": "running", "kind": kind, "period": period,
                  "period_from": period_from, "period_to": period_to, "trigger": trigger,
                  "attempt": attempt, "master": master, "input": input_path, "out": "",
                  "error": "", "pid": os.getpid()})
    run_id = int(table.last_pk)
    db.close()
    return run_id


def finish(run_id: int, *, status: str, duration_s: float, out: str = "", error: str = "",
           summary: Mapping[str, Any] | None = None) -> None:
    """Record how run `run_id` ended, with the summary's headline figures."""
    values: dict[str, Any] = {"finished": _now(), "status": status, "out": out,
                              "duration_s": round(duration_s, 2), "error": error}
    if summary is not None:
        totals = summary["totals"]
        values |= {"groups": totals["groups"], "groups_in_breach": totals["groups_in_breach"],
                   "slo_minutes": totals["slo_minutes"],
                   "top_offenders": json.dumps([t["group"] for t in summary["top_offenders"]])}
    db = _open()
    db.table(TABLE).update(run_id, values)
    db.close()


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _row(raw: Mapping[str, Any]) -> dict[str, Any]:
    status = raw["status"]
    if status == "running" and not _alive(raw["pid"]):
        status = "died"
    return {"id": raw["id"], "started": raw["started"], "finished": raw["finished"],
            "status": status, "kind": raw["kind"], "period": raw["period"],
            "from": raw["period_from"], "to": raw["period_to"], "trigger": raw["trigger"],
            "attempt": raw["attempt"], "master": raw["master"], "input": raw["input"],
            "out": raw["out"], "duration_s": raw["duration_s"], "groups": raw["groups"],
            "groups_in_breach": raw["groups_in_breach"], "slo_minutes": raw["slo_minutes"],
            "top_offenders": json.loads(raw["top_offenders"] or "[]"),
            "error": raw["error"], "pid": raw["pid"]}


def records(*, limit: int = 20, run_id: int | None = None) -> list[dict[str, Any]]:
    """The newest `limit` runs, oldest first (or the one with `run_id`)."""
    if not history.db_path().exists():
        return []
    db = _open()
    where, args = ("id = ?", [run_id]) if run_id is not None else (None, [])
    found = list(db.table(TABLE).rows_where(where, args, order_by="id desc", limit=limit))
    db.close()
    return [_row(r) for r in reversed(found)]


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Hold the report lock for the block.

    Raises:
        ReportBusy: another report holds it (names the run when known).
    """
    folder = reports_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            running = [r for r in records(limit=50) if r["status"] == "running"]
            which = (f" (run {running[-1]['id']}, started {running[-1]['started']})"
                     if running else "")
            raise ReportBusy(f"another report is running{which}; wait for it to finish "
                             "(`mqadmin report list`) and run this one again") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def busy() -> bool:
    """Whether a report holds the lock right now."""
    try:
        with exclusive():
            return False
    except ReportBusy:
        return True
