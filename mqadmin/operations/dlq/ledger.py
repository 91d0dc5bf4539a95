"""The dead-letter ledger: one row per dead letter resent or discarded, written ahead.

How this works: two tables in the admin database (`history.db_path`, SQLite through
sqlite-utils).  ``dlq_batches`` has one row per resend or discard; ``dlq_ledger`` one row per
dead letter in a batch.  A resend first writes every row of its batch as ``pending`` with
the unique key (UNIQ_KEY) its copy will carry, then, a chunk at a time, marks rows
``sending`` (committed) before the sends and ``sent`` or ``failed`` after the broker's
answers.  So after any interruption each row says what may have happened: ``pending`` was
never sent, ``sent`` was stored (SEND_OK), and ``sending``/``failed`` are looked up on the
target by their unique key before being sent again.  A discard writes ``discarded`` rows.
Dead letters are identified by their position (`DeadLetter.key`) within a scope (the
cluster's name servers), so a fail-over to a slave does not make them look new.

    state       meaning                                   triage shown by `dlq show`
    pending     in a batch, not sent yet                  resending
    sending     sent or being sent, answer not recorded   resending
    sent        the broker answered SEND_OK               resent
    failed      refused, not SEND_OK, or no answer        unhandled
    discarded   marked handled without a resend           discarded
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin import history

if TYPE_CHECKING:
    from sqlite_utils import Database

    from mqadmin.config import Endpoint

BATCHES = "dlq_batches"
LEDGER = "dlq_ledger"
PENDING, SENDING, SENT, FAILED, DISCARDED = "pending", "sending", "sent", "failed", "discarded"
TRIAGE = {PENDING: "resending", SENDING: "resending", SENT: "resent", FAILED: "unhandled",
          DISCARDED: "discarded"}
#: States that count as handled (a second resend skips them unless --again).
HANDLED = (SENT, DISCARDED, PENDING, SENDING)

Row = dict[str, Any]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def new_batch_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


@dataclass(frozen=True, slots=True)
class Batch:
    batch: str
    scope: str
    group: str
    action: str  # resend | discard
    target: str  # retry | topic | (discard) -
    filters: str
    who: str
    at: str
    total: int
    reason: str = ""


def _tables(db: Database) -> None:
    names = set(db.table_names())
    if BATCHES not in names:
        db.table(BATCHES).create({
            "batch": str, "scope": str, "group_name": str, "action": str, "target": str,
            "filters": str, "who": str, "at": str, "total": int, "reason": str}, pk="batch")
        db.table(BATCHES).create_index(["scope", "group_name"])
    if LEDGER not in names:
        db.table(LEDGER).create({
            "id": int, "batch": str, "scope": str, "group_name": str, "dl_key": str,
            "dl_msg_id": str, "dl_offset_msg_id": str, "origin_topic": str,
            "target_topic": str, "new_msg_id": str, "new_broker": str, "new_queue_id": int,
            "new_queue_offset": int, "state": str, "status": str, "who": str, "at": str,
            "updated_at": str}, pk="id")
        db.table(LEDGER).create_index(["scope", "group_name", "dl_key"])
        db.table(LEDGER).create_index(["batch", "state"])


class Ledger:
    """The ledger of one cluster (`scope`): ``with Ledger(scope) as ledger: ...``."""

    def __init__(self, scope: str, path: Path | None = None) -> None:
        self.scope = scope
        self.path = path or history.db_path()
        self._db: Database | None = None

    # ------------------------------------------------------------------ connection

    @property
    def db(self) -> Database:
        if self._db is None:
            db = history.open_db(self.path, tables=_tables)
            db.execute("PRAGMA synchronous=NORMAL")  # durable across a process kill
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reads

    def triage(self, group: str) -> dict[str, str]:
        """Dead-letter key -> its ledger state (the most decisive row wins: sent, then
        discarded, then in flight, then failed)."""
        if not self.path.exists() and self._db is None:
            return {}
        rank = {SENT: 4, DISCARDED: 3, SENDING: 2, PENDING: 2, FAILED: 1}
        out: dict[str, str] = {}
        for key, state in self.db.execute(
                f"select dl_key, state from {LEDGER} where scope = ? and group_name = ?",
                [self.scope, group]).fetchall():
            if rank.get(state, 0) > rank.get(out.get(key, ""), 0):
                out[key] = state
        return out

    def handled(self, group: str) -> set[str]:
        return {k for k, s in self.triage(group).items() if s in HANDLED}

    def batch(self, batch: str) -> Batch | None:
        if not self.path.exists() and self._db is None:
            return None
        found = list(self.db.table(BATCHES).rows_where("batch = ? and scope = ?",
                                                       [batch, self.scope]))
        return _batch(found[0]) if found else None

    def batches(self, group: str | None = None, limit: int = 20) -> list[Batch]:
        """The newest batches (of one group), newest first."""
        if not self.path.exists() and self._db is None:
            return []
        where, args = "scope = ?", [self.scope]
        if group:
            where += " and group_name = ?"
            args.append(group)
        return [_batch(r) for r in self.db.table(BATCHES).rows_where(
            where, args, order_by="at desc", limit=limit)]

    def rows(self, batch: str, states: Iterable[str] | None = None) -> list[Row]:
        where, args = "batch = ?", [batch]
        if states is not None:
            wanted = list(states)
            where += f" and state in ({', '.join('?' for _ in wanted)})"
            args += wanted
        cursor = self.db.execute(f"select * from {LEDGER} where {where} order by id", args)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    def counts(self, batch: str) -> dict[str, int]:
        return dict(self.db.execute(
            f"select state, count(*) from {LEDGER} where batch = ? group by state",
            [batch]).fetchall())

    # ------------------------------------------------------------------ writes

    def open_batch(self, batch: Batch, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Write the batch and all its rows in one transaction; the rows' ids, in order."""
        db = self.db
        with db.conn:
            db.conn.execute(
                f"insert into {BATCHES} (batch, scope, group_name, action, target, filters, "
                "who, at, total, reason) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (batch.batch, batch.scope, batch.group, batch.action, batch.target,
                 batch.filters, batch.who, batch.at, batch.total, batch.reason))
            db.conn.executemany(
                f"insert into {LEDGER} ({', '.join(_ROW_COLUMNS)}) "
                f"values ({', '.join('?' for _ in _ROW_COLUMNS)})",
                [(batch.batch, batch.scope, batch.group, r["dl_key"], r["dl_msg_id"],
                  r["dl_offset_msg_id"], r["origin_topic"], r.get("target_topic"),
                  r.get("new_msg_id"), r["state"], r.get("status"), batch.who, batch.at,
                  batch.at) for r in rows])
        return [i for (i,) in db.execute(
            f"select id from {LEDGER} where batch = ? order by id", [batch.batch]).fetchall()]

    def mark(self, ids: Sequence[int], state: str) -> None:
        """Set `state` on the rows (committed before this returns)."""
        self.advance((), ids, state)

    def record(self, outcomes: Sequence[Mapping[str, Any]]) -> None:
        """Write send outcomes: each has id, state, status and the new message's place."""
        self.advance(outcomes, ())

    def advance(self, outcomes: Sequence[Mapping[str, Any]], ids: Sequence[int],
                state: str = SENDING) -> None:
        """`record` the outcomes and `mark` the rows `state`, in one transaction (committed
        before this returns)."""
        at = now_iso()
        conn = self.db.conn
        with conn:
            if outcomes:
                conn.executemany(
                    f"update {LEDGER} set state = ?, status = ?, new_broker = ?, "
                    "new_queue_id = ?, new_queue_offset = ?, updated_at = ? where id = ?",
                    [(o["state"], o.get("status"), o.get("new_broker"), o.get("new_queue_id"),
                      o.get("new_queue_offset"), at, o["id"]) for o in outcomes])
            if ids:
                conn.executemany(f"update {LEDGER} set state = ?, updated_at = ? where id = ?",
                                 [(state, at, i) for i in ids])


_ROW_COLUMNS = ("batch", "scope", "group_name", "dl_key", "dl_msg_id", "dl_offset_msg_id",
                "origin_topic", "target_topic", "new_msg_id", "state", "status", "who", "at",
                "updated_at")


def ledger_of(where: Endpoint) -> Ledger:
    """The ledger of the cluster `where` names (the CLI's and the dashboard's alike)."""
    return Ledger(where.ledger_scope)


def _batch(r: Mapping[str, Any]) -> Batch:
    return Batch(r["batch"], r["scope"], r["group_name"], r["action"], r["target"],
                 r["filters"], r["who"], r["at"], r["total"], r["reason"] or "")

