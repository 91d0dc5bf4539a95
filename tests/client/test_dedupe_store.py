"""The SQLite key store on its own: claims, leases, the window, two processes' connections."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.client.consume.dedupe import Claim
from engine.client.consume.dedupe_sqlite import SqliteKeyStore, ensure_schema, mark_consumed
from tests.clock import ManualClock

NEW, CONSUMED, BUSY = Claim.NEW, Claim.CONSUMED, Claim.BUSY


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteKeyStore]:
    s = SqliteKeyStore(tmp_path / "keys.db", window_ms=10_000, clock=clock)
    try:
        yield s
    finally:
        await s.close()


async def test_a_key_is_claimed_once_consumed_once_and_released_on_failure(
        store: SqliteKeyStore) -> None:
    assert await store.claim("G", ["k1", "k2"], "A", 1000) == [NEW, NEW]
    assert await store.claim("G", ["k1", "k2", "k3"], "B", 1000) == [BUSY, BUSY, NEW]
    await store.finish("G", ["k1"], "A", True)
    await store.finish("G", ["k2"], "A", False)
    assert await store.claim("G", ["k1", "k2"], "B", 1000) == [CONSUMED, NEW]
    # another group has its own record of the same keys
    assert await store.claim("H", ["k1"], "A", 1000) == [NEW]


async def test_the_same_key_twice_in_one_claim_runs_once(store: SqliteKeyStore) -> None:
    assert await store.claim("G", ["k", "k"], "A", 1000) == [NEW, BUSY]


async def test_a_release_by_another_owner_leaves_the_lease(store: SqliteKeyStore) -> None:
    await store.claim("G", ["k"], "A", 1000)
    await store.finish("G", ["k"], "B", False)
    assert await store.claim("G", ["k"], "B", 1000) == [BUSY]


async def test_an_expired_lease_is_claimed_again_and_renewal_keeps_it(
        store: SqliteKeyStore, clock: ManualClock) -> None:
    await store.claim("G", ["dies", "lives"], "A", 1000)
    clock.advance(800)
    await store.renew("G", ["lives"], "A", 1000)
    clock.advance(300)  # 1,100 ms after the claim: "dies" expired, "lives" renewed at 800
    assert await store.claim("G", ["dies", "lives"], "B", 1000) == [NEW, BUSY]


async def test_consumed_keys_count_for_the_window_only(store: SqliteKeyStore,
                                                       clock: ManualClock) -> None:
    await store.claim("G", ["k"], "A", 1000)
    await store.finish("G", ["k"], "A", True)
    clock.advance(9_999)
    assert await store.claim("G", ["k"], "B", 1000) == [CONSUMED]
    clock.advance(1)
    assert await store.claim("G", ["k"], "B", 1000) == [NEW]


async def test_claims_made_together_share_one_transaction(store: SqliteKeyStore) -> None:
    results = await asyncio.gather(*(store.claim("G", [f"k{i}"], "A", 1000)
                                     for i in range(200)))
    assert all(r == [NEW] for r in results)
    assert store.transactions <= 3


async def test_live_keys_among_new_ones_in_one_flush(store: SqliteKeyStore) -> None:
    """A flush whose keys are not all free takes the per-key path: every claim still gets
    its own answer, and the new keys are held afterwards."""
    assert await store.claim("G", ["held"], "A", 1000) == [NEW]
    await store.finish("G", ["done"], "A", True)
    before = store.transactions
    results = await asyncio.gather(
        store.claim("G", ["n1"], "B", 1000), store.claim("G", ["held", "n2"], "B", 1000),
        store.claim("G", ["done"], "B", 1000), store.claim("G", ["n1"], "C", 1000))
    assert results == [[NEW], [BUSY, NEW], [CONSUMED], [BUSY]]
    assert store.transactions == before + 1
    assert await store.claim("G", ["n1", "n2", "n3"], "D", 1000) == [BUSY, BUSY, NEW]


async def test_two_stores_on_one_file_see_each_others_claims(tmp_path: Path) -> None:
    """Two consumers (processes) sharing the file: exactly one wins each key."""
    path = tmp_path / "shared.db"
    a, b = SqliteKeyStore(path), SqliteKeyStore(path)
    try:
        keys = [f"k{i}" for i in range(300)]
        got_a, got_b = await asyncio.gather(a.claim("G", keys, "A", 60_000),
                                            b.claim("G", keys, "B", 60_000))
        for x, y in zip(got_a, got_b, strict=True):
            assert {x, y} == {NEW, BUSY}
    finally:
        await a.close()
        await b.close()


async def test_the_application_records_a_key_in_its_own_transaction(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    store = SqliteKeyStore(path)
    try:
        assert await store.claim("G", ["order-1", "order-2"], "A", 60_000) == [NEW, NEW]
        conn = sqlite3.connect(path, isolation_level=None)
        ensure_schema(conn)
        conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY)")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO orders VALUES ('order-1')")
        mark_consumed(conn, "G", "order-1")
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO orders VALUES ('order-2')")
        mark_consumed(conn, "G", "order-2")
        conn.execute("ROLLBACK")  # the effect failed: neither it nor the record stays
        conn.close()
        await store.finish("G", ["order-2"], "A", False)
        assert await store.claim("G", ["order-1", "order-2"], "B", 60_000) == [CONSUMED, NEW]
    finally:
        await store.close()


def test_a_bad_window_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="window_ms"):
        SqliteKeyStore(tmp_path / "x.db", window_ms=0)


async def test_another_process_holding_the_lock_never_blocks_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SqliteKeyStore(path)
    try:
        assert await store.claim("G", ["warm-up"], "A", 60_000) == [NEW]
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process writing
        claim = asyncio.ensure_future(store.claim("G", ["k"], "A", 60_000))
        done, _ = await asyncio.wait({claim}, timeout=0.3)  # the loop keeps running
        assert not done
        holder.execute("COMMIT")
        holder.close()
        assert await claim == [NEW]
    finally:
        await store.close()


async def test_expired_rows_are_swept_as_new_keys_are_claimed(tmp_path: Path,
                                                              store: SqliteKeyStore,
                                                              clock: ManualClock) -> None:
    """The table stays near (rate x window): the sweep looks at one row per operation (a
    claim and a finish per message), so after the window, the claims and finishes of as
    many messages as the table holds remove every old row."""
    old = [f"old-{i:03d}" for i in range(120)]
    for i in range(0, len(old), 10):
        await store.claim("G", old[i:i + 10], "A", 1000)
        await store.finish("G", old[i:i + 10], "A", True)
    clock.advance(10_001)  # past the window: every old row is expired
    new = [f"new-{i:03d}" for i in range(120)]
    for i in range(0, len(new), 10):
        await store.claim("G", new[i:i + 10], "A", 1000)
        await store.finish("G", new[i:i + 10], "A", True)
    with sqlite3.connect(tmp_path / "keys.db") as db:
        left = [k for (k,) in db.execute("SELECT key FROM consumed_keys ORDER BY key")]
    assert left == new
