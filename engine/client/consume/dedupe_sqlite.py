"""`SqliteKeyStore`: the record of consumed business keys in one SQLite file, writes batched.

How this works: one table, one row per (group, key)::

    consumed_keys(grp, key, state, owner, until)   PRIMARY KEY (grp, key)
      state 0 CONSUMING  owner holds a lease until `until` (ms since the epoch)
      state 1 CONSUMED   the key was consumed; the record counts until `until` (the window)

A row whose `until` has passed counts as absent: an expired lease is a consumer that died
while consuming (its key may be claimed again); an expired CONSUMED row is outside the
window.  Claims and finishes from the event loop are queued and applied in one ``BEGIN
IMMEDIATE`` transaction per flush, so at 10,000 messages/s one transaction
carries dozens of them and other processes sharing the file see every claim atomically (the
write lock makes claim-if-absent safe across processes).  A flush runs on the event loop's
thread when the lock is free at once and moves to the worker thread when it is not, so a
consumer's loop never waits for another process.  WAL with ``synchronous=NORMAL``:
a committed claim survives the death of the process (not of the machine's power).

An application that wants its listener's effect and the key's record to commit together
keeps its own tables in the same file and calls `mark_consumed` inside its own transaction
(docs/client.md shows it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.client.consume.dedupe import Claim

CONSUMING = 0
CONSUMED = 1
DEFAULT_WINDOW_MS = 48 * 3600 * 1000  # longer than the 16 retry levels (about 4 h 46 min)
SWEEP_PER_KEY = 1  # rows looked at for expiry per key of the operations applied (_sweep)
LINGER = 0.002  # seconds a claim waits for others to share its transaction
LOCK_WAIT = 30.0  # seconds the worker thread waits for another process's write lock
CHUNK = 200  # keys per statement (4 variables a key), below SQLite's variable limit

SCHEMA = """
CREATE TABLE IF NOT EXISTS consumed_keys (
    grp TEXT NOT NULL, key TEXT NOT NULL, state INTEGER NOT NULL, owner TEXT NOT NULL,
    until INTEGER NOT NULL, PRIMARY KEY (grp, key)) WITHOUT ROWID;
"""
UPSERT = ("INSERT INTO consumed_keys (grp, key, state, owner, until) VALUES (?, ?, ?, ?, ?) "
          "ON CONFLICT (grp, key) DO UPDATE SET state = excluded.state, "
          "owner = excluded.owner, until = excluded.until")
CONSUME = "UPDATE consumed_keys SET state = 1, owner = '', until = ? WHERE grp = ?"
CLAIM_FREE_HEAD = "INSERT INTO consumed_keys (grp, key, state, owner, until) VALUES "
CLAIM_FREE_ROW = "(?, ?, 0, ?, ?)"
CLAIM_FREE_TAIL = (" ON CONFLICT (grp, key) DO UPDATE SET state = 0, owner = excluded.owner, "
                   "until = excluded.until WHERE consumed_keys.until <= ?")
RELEASE = "DELETE FROM consumed_keys WHERE grp = ? AND key = ? AND owner = ? AND state = 0"
RENEW = ("UPDATE consumed_keys SET until = ? "
         "WHERE grp = ? AND key = ? AND owner = ? AND state = 0")


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


def mark_consumed(conn: sqlite3.Connection, group: str, key: str, *,
                  window_ms: int = DEFAULT_WINDOW_MS, now_ms: int | None = None) -> None:
    """Record `key` as consumed by `group` inside the caller's open transaction on `conn`
    (the same database file as the store): the listener's effect and the record then commit
    or roll back together."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    conn.execute(UPSERT, (group, key, CONSUMED, "", now + window_ms))


class Locked(Exception):
    """The database's write lock is held by another connection (process)."""


@dataclass(slots=True)
class _Op:
    kind: str  # claim | consumed | release | renew
    group: str
    keys: Sequence[str]
    owner: str
    lease_ms: int
    future: asyncio.Future[Any]


class SqliteKeyStore:
    """The default `KeyStore`: ``SqliteKeyStore("consumed-keys.db")`` (one file per host;
    one store object serves the consumers of one event loop)."""

    def __init__(self, path: str | Path, *, window_ms: int = DEFAULT_WINDOW_MS,
                 clock: Callable[[], int] | None = None, linger: float = LINGER) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms must be positive, got {window_ms}")
        self.path = Path(path)
        self.window_ms = window_ms
        self.linger = linger
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="dedupe-sqlite")
        self._fast: sqlite3.Connection | None = None
        self._slow: sqlite3.Connection | None = None
        self._pending: list[_Op] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first call
        self._flushing = False
        self._idle: asyncio.Event | None = None  # set when nothing is queued or flushing
        self._sweep_from = ("", "")  # (grp, key) where the expiry sweep goes on
        self.transactions = 0  # flushes applied (for benchmarks and tests)

    # ------------------------------------------------------------------ KeyStore

    def claim(self, group: str, keys: Sequence[str], owner: str,
              lease_ms: int) -> Awaitable[list[Claim]]:
        return self._submit("claim", group, keys, owner, lease_ms)

    def finish(self, group: str, keys: Sequence[str], owner: str,
               consumed: bool) -> Awaitable[None]:
        return self._submit("consumed" if consumed else "release", group, keys, owner, 0)

    def renew(self, group: str, keys: Sequence[str], owner: str,
              lease_ms: int) -> Awaitable[None]:
        return self._submit("renew", group, keys, owner, lease_ms)

    async def close(self) -> None:
        """Wait for queued writes, then close the connections and the worker thread."""
        if self._flushing:
            self._idle = asyncio.Event()
            await self._idle.wait()
        for conn in (self._fast, self._slow):
            if conn is not None:
                conn.close()
        self._fast = self._slow = None
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ batching

    def _submit(self, kind: str, group: str, keys: Sequence[str], owner: str,
                lease_ms: int) -> asyncio.Future[Any]:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not keys:
            future.set_result([] if kind == "claim" else None)
            return future
        self._pending.append(_Op(kind, group, keys, owner, lease_ms, future))
        if not self._flushing:
            self._flushing = True
            loop.call_later(self.linger, self._flush, loop)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Apply the queued operations on the event loop's thread when the write lock is
        free at once (the usual case: a transaction takes well under a millisecond), else in
        the worker thread, which waits for another process to let go of it."""
        ops, self._pending = self._pending, []
        try:
            results = self._apply(self._connection(fast=True), ops)
        except Locked:
            done = loop.run_in_executor(self._executor, self._apply_waiting, ops)
            done.add_done_callback(lambda f: self._flushed(
                loop, ops, f.exception(), None if f.exception() else f.result()))
            return
        except Exception as exc:
            self._flushed(loop, ops, exc, None)
            return
        self._flushed(loop, ops, None, results)

    def _flushed(self, loop: asyncio.AbstractEventLoop, ops: list[_Op],
                 exc: BaseException | None, results: list[list[Claim] | None] | None) -> None:
        for i, op in enumerate(ops):
            if op.future.done():
                continue
            if results is None:
                op.future.set_exception(exc or RuntimeError("key store flush failed"))
            else:
                op.future.set_result(results[i])
        if self._pending:
            self._flush(loop)
        else:
            self._flushing = False
            if self._idle is not None:
                self._idle.set()

    # ------------------------------------------------------------------ transactions

    def _connection(self, *, fast: bool) -> sqlite3.Connection:
        """The loop thread's connection (never waits for a lock) or the worker's (waits)."""
        conn = self._fast if fast else self._slow
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=0.0 if fast else LOCK_WAIT,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {0 if fast else int(LOCK_WAIT * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            ensure_schema(conn)
            if fast:
                self._fast = conn
            else:
                self._slow = conn
        return conn

    def _apply_waiting(self, ops: list[_Op]) -> list[list[Claim] | None]:
        return self._apply(self._connection(fast=False), ops)

    def _apply(self, conn: sqlite3.Connection, ops: list[_Op]) -> list[list[Claim] | None]:
        """One transaction for a flush: finishes first (they only concern keys their owner
        already holds), then every claim, by group.

        Raises:
            Locked: another connection holds the write lock (only with a fast connection).
        """
        now = self._clock()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise Locked(str(exc)) from None
            raise
        try:
            claims: dict[str, list[int]] = {}
            consumed: dict[str, list[str]] = {}
            released: list[tuple[str, str, str]] = []
            renewed: list[tuple[int, str, str, str]] = []
            keys_seen = 0
            for i, op in enumerate(ops):
                keys_seen += len(op.keys)
                if op.kind == "claim":
                    claims.setdefault(op.group, []).append(i)
                elif op.kind == "consumed":
                    consumed.setdefault(op.group, []).extend(op.keys)
                elif op.kind == "release":
                    released.extend((op.group, k, op.owner) for k in op.keys)
                else:
                    renewed.extend((now + op.lease_ms, op.group, k, op.owner) for k in op.keys)
            self._finish(conn, now, consumed, released, renewed)
            out: list[list[Claim] | None] = [None] * len(ops)
            for group, indexes in claims.items():
                self._claim(conn, group, [ops[i] for i in indexes], now, out, indexes)
            self._sweep(conn, now, SWEEP_PER_KEY * keys_seen)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.transactions += 1
        return out

    def _sweep(self, conn: sqlite3.Connection, now: int, rows: int) -> None:
        """Delete expired rows among the next `rows` in key order, wrapping around.  Looking
        at a row per key claimed or finished (two per message) keeps the table near
        4/3 x (rate x window) rows, however many keys an operation carries, without an index
        on `until`, which would double the cost of every write."""
        if rows <= 0:
            return
        start = self._sweep_from
        last = conn.execute(
            "SELECT grp, key FROM consumed_keys WHERE (grp, key) > (?, ?) "
            "ORDER BY grp, key LIMIT 1 OFFSET ?", (*start, rows - 1)).fetchone()
        if last is None:  # fewer rows than that left: sweep to the end, then wrap around
            conn.execute("DELETE FROM consumed_keys WHERE (grp, key) > (?, ?) AND until <= ?",
                         (*start, now))
            self._sweep_from = ("", "")
        else:
            conn.execute("DELETE FROM consumed_keys WHERE (grp, key) > (?, ?) "
                         "AND (grp, key) <= (?, ?) AND until <= ?", (*start, *last, now))
            self._sweep_from = (last[0], last[1])

    def _finish(self, conn: sqlite3.Connection, now: int, consumed: dict[str, list[str]],
                released: list[tuple[str, str, str]],
                renewed: list[tuple[int, str, str, str]]) -> None:
        until = now + self.window_ms
        for group, keys in consumed.items():
            for part in _chunks(list(dict.fromkeys(keys))):
                marks = ",".join("?" * len(part))
                updated = conn.execute(f"{CONSUME} AND key IN ({marks})",
                                       (until, group, *part)).rowcount
                # the claim wrote each row; one swept away meanwhile (an expired lease) is
                # inserted
                if updated != len(part):
                    conn.executemany(UPSERT, [(group, k, CONSUMED, "", until) for k in part])
        if released:
            conn.executemany(RELEASE, released)
        if renewed:
            conn.executemany(RENEW, renewed)

    def _claim(self, conn: sqlite3.Connection, group: str, ops: list[_Op], now: int,
               out: list[list[Claim] | None], indexes: list[int]) -> None:
        """Claim the keys of `ops` (all of `group`) in order, results into `out`.

        Each chunk of distinct keys is first claimed whole with one multi-row upsert that
        only takes rows absent or expired (the usual case: every key is new); when it took
        fewer rows than keys, it is undone and the chunk's live rows are read instead."""
        firsts: dict[str, _Op] = {}  # the first operation naming each key holds it
        for op in ops:
            for key in op.keys:
                firsts.setdefault(key, op)
        live: dict[str, int] = {}
        written: set[str] = set()  # claimed by the multi-row upsert
        for part in _chunks(list(firsts)):
            if self._claim_free(conn, group, part, firsts, now):
                written.update(part)
                continue
            marks = ",".join("?" * len(part))
            for key, state in conn.execute(
                    f"SELECT key, state FROM consumed_keys WHERE grp = ? AND until > ? "
                    f"AND key IN ({marks})", (group, now, *part)):
                live[key] = state
        new: list[tuple[str, str, int, str, int]] = []
        for index, op in zip(indexes, ops, strict=True):
            result: list[Claim] = []
            for key in op.keys:
                state = live.get(key)
                if state is None:
                    result.append(Claim.NEW)
                    live[key] = CONSUMING  # the same key twice in one flush: one runs
                    if key not in written:
                        new.append((group, key, CONSUMING, op.owner, now + op.lease_ms))
                else:
                    result.append(Claim.CONSUMED if state == CONSUMED else Claim.BUSY)
            out[index] = result
        if new:
            conn.executemany(UPSERT, new)

    @staticmethod
    def _claim_free(conn: sqlite3.Connection, group: str, keys: list[str],
                    firsts: dict[str, _Op], now: int) -> bool:
        """Take every one of `keys` (distinct) in one statement if none is live; else change
        nothing and return False."""
        values: list[object] = []
        for key in keys:
            op = firsts[key]
            values += (group, key, op.owner, now + op.lease_ms)
        conn.execute("SAVEPOINT claim")
        before = conn.total_changes
        conn.execute(f"{CLAIM_FREE_HEAD}{','.join([CLAIM_FREE_ROW] * len(keys))}"
                     f"{CLAIM_FREE_TAIL}", (*values, now))
        if conn.total_changes - before == len(keys):
            conn.execute("RELEASE claim")
            return True
        conn.execute("ROLLBACK TO claim")
        conn.execute("RELEASE claim")
        return False


def _chunks(keys: list[str]) -> list[list[str]]:
    return [keys[i:i + CHUNK] for i in range(0, len(keys), CHUNK)]
