"""The admin database (SQLite via sqlite-utils): the audit log of every change mqadmin made.

How this works: one file, ``mqadmin.db`` under mqadmin's home (home.py), one row per
mutation that reached the servers: when (UTC, ISO 8601), who (user@host), the context and
name servers, the command and its arguments, the plan shown, the verified result, and how
it ended (``applied``, ``partial``, ``unverified``, ``failed``).  Plans and results are
stored as JSON text so the same rows the CLI printed can be shown again.  Secrets never reach
the file: `append`, the one writer, records a secret argument only as ``******``.  sqlite_utils is
imported when the database is first used, so read-only commands never pay for it.

The same file holds the DLQ ledger, the lag window and the report runs; every module opens it
with `open_db`, so a writer waits for another (the dashboard's header reading the ledger
while a change is audited, a collector beside a CLI) instead of failing at once.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import getpass
import json
import socket
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.home import home

if TYPE_CHECKING:
    from sqlite_utils import Database

DB_FILE = "mqadmin.db"
AUDIT_TABLE = "audit"

AUDIT_COLUMNS = ("id", "at", "who", "context", "command", "target", "outcome", "exitCode")
AUDIT_DETAIL_COLUMNS = ("id", "at", "who", "context", "namesrv", "command", "args", "target",
                        "outcome", "exitCode", "message", "plan", "result")

#: Arguments that do not belong in a record (how a command prints, not what it changes).
NOT_AUDITED = frozenset({"output", "debug", "yes", "dry_run"})
#: Arguments recorded only as `MASK` when given (passwords, secret keys, their files).
SECRET_ARGS = frozenset({"password", "password_file", "secret_key", "secret_key_file"})
MASK = "******"


def db_path() -> Path:
    return home() / DB_FILE


#: How long a statement waits for another connection's lock before it fails.
BUSY_TIMEOUT_S = 30.0


def open_db(path: Path | None = None,
            tables: Callable[[Database], None] | None = None) -> Database:
    """The admin database (`db_path`, or `path`) in WAL mode, every statement waiting up to
    `BUSY_TIMEOUT_S` for another connection's lock, with `tables(db)` run to create what is
    missing (in one transaction).  The switch to WAL runs under a lock file beside the
    database: it does not wait on a busy file, SQLite fails it at once instead."""
    from sqlite_utils import Database

    path = path or db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = Database(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S))
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if db.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.conn.execute("PRAGMA journal_mode=WAL")
        if tables is not None:
            # the write lock first: a statement that reads the schema and then writes fails
            # at once ("database is locked") when another connection wrote in between
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                tables(db)
            except BaseException:
                db.conn.rollback()
                raise
            db.conn.commit()
    return db


def _audit_table(db: Database) -> None:
    if AUDIT_TABLE not in db.table_names():
        db.table(AUDIT_TABLE).create({
            "id": int, "at": str, "who": str, "context": str, "namesrv": str,
            "command": str, "args": str, "target": str, "outcome": str, "exit_code": int,
            "message": str, "plan": str, "result": str,
        }, pk="id")
        db.table(AUDIT_TABLE).create_index(["at"])


def _open() -> Database:
    return open_db(tables=_audit_table)


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One change as it is written to the audit table."""

    command: str
    args: Mapping[str, Any]
    target: str
    outcome: str
    exit_code: int
    plan: Sequence[Mapping[str, Any]]
    result: Sequence[Mapping[str, Any]]
    context: str | None = None
    namesrv: str = ""
    message: str = ""


def masked(args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` as recorded: secrets masked, the output options left out."""
    return {k: (MASK if k in SECRET_ARGS and v else v) for k, v in args.items()
            if k not in NOT_AUDITED}


def append(record: AuditRecord) -> int:
    """Append `record` (its secret arguments masked); returns its id."""
    db = _open()
    row = {
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "who": who(), "context": record.context, "namesrv": record.namesrv,
        "command": record.command, "args": json.dumps(masked(record.args), default=str),
        "target": record.target, "outcome": record.outcome, "exit_code": record.exit_code,
        "message": record.message, "plan": json.dumps(list(record.plan), default=str),
        "result": json.dumps(list(record.result), default=str),
    }
    table = db.table(AUDIT_TABLE)
    table.insert(row)
    last = table.last_pk
    db.close()
    return int(last) if last is not None else 0


def _row(raw: Mapping[str, Any], detail: bool) -> dict[str, Any]:
    args = json.loads(raw["args"] or "{}")
    row = {"id": raw["id"], "at": raw["at"], "who": raw["who"], "context": raw["context"],
           "command": raw["command"], "target": raw["target"], "outcome": raw["outcome"],
           "exitCode": raw["exit_code"], "via": args.get("via", "cli")}
    if detail:
        row |= {"namesrv": raw["namesrv"], "args": args, "message": raw["message"],
                "plan": json.loads(raw["plan"] or "[]"),
                "result": json.loads(raw["result"] or "[]")}
    return row


def records(*, limit: int = 20, command: str | None = None, record_id: int | None = None,
            detail: bool = False) -> list[dict[str, Any]]:
    """The newest `limit` records (of `command` only, or the one with `record_id`), oldest
    first, each with the front-end that made it (`via`: ``cli``, ``dashboard``); an absent
    database has none.  `mqadmin audit` and the dashboard's Audit screen both read this."""
    if not db_path().exists():
        return []
    db = _open()
    where: list[str] = []
    args: list[Any] = []
    if command:
        where.append("command = ?")
        args.append(command)
    if record_id is not None:
        where.append("id = ?")
        args.append(record_id)
    found = list(db.table(AUDIT_TABLE).rows_where(" and ".join(where) or None, args,
                                                  order_by="id desc", limit=limit))
    db.close()
    return [_row(r, detail) for r in reversed(found)]
