"""`dedupe_ahead.QueueKeys` on its own: an orderly queue's keys claimed ahead over a real SQLite
key store, without a broker (what each turn hands the listener, what the store records, and
when the queue's offset may move)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.client.consume.dedupe import Claim, Dedupe, Guard
from engine.client.consume.dedupe_ahead import QueueKeys
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from engine.client.consume.process_queue import ProcessQueue
from engine.client.core.message import MessageExt


def msg(offset: int, key: str | None) -> MessageExt:
    host = ("127.0.0.1", 10911)
    return MessageExt("T", f"m{offset}".encode(), {"KEYS": key} if key else {}, "broker-a", 0,
                      offset, 0, 0, 0, 0, host, 0, host, 0, 0)


class GatedStore(SqliteKeyStore):
    """The real store whose CONSUMED records wait for `gate` (a slow or failing disk)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = asyncio.Event()
        self.gate.set()
        self.held_back = asyncio.Event()  # a CONSUMED record waits at the gate
        self.fail = False

    async def finish(self, group: str, keys: Sequence[str], owner: str,
                     consumed: bool) -> None:
        if consumed:
            if not self.gate.is_set():
                self.held_back.set()
            await self.gate.wait()
            if self.fail:
                raise OSError("disk full")
        await super().finish(group, keys, owner, consumed)


class Queue:
    """A process queue with its `QueueKeys`, the offsets it committed and whether a failed
    record dropped it."""

    def __init__(self, guard: Guard) -> None:
        self.pq = ProcessQueue()
        self.offsets: list[int] = []
        self.failed = False
        self.keys = QueueKeys(guard, self.pq, self.offsets.append, self._failed)

    def _failed(self) -> None:
        self.failed = True

    def pull(self, *msgs: MessageExt) -> None:
        self.pq.put(list(msgs))
        self.keys.pulled(msgs)

    async def turn(self, n: int = 1) -> tuple[list[MessageExt], list[MessageExt], bool]:
        """(messages taken, messages for the listener, busy)."""
        taken = self.pq.take(n)
        run, busy = await self.keys.turn(taken)
        return taken, run, busy

    def succeed(self, taken: list[MessageExt]) -> asyncio.Future[None] | None:
        record = self.keys.finished(taken, True, False)
        self.keys.commit(self.pq.commit(), record)
        return record


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[GatedStore]:
    s = GatedStore(tmp_path / "keys.db")
    try:
        yield s
    finally:
        s.gate.set()
        await s.close()


@pytest.fixture
def guard(store: GatedStore) -> Guard:
    return Guard(Dedupe(store), "G", "me")


def bodies(msgs: list[MessageExt]) -> list[str]:
    return [m.body.decode() for m in msgs]


async def test_a_pull_is_claimed_in_one_operation_before_its_turn(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"), msg(2, None), msg(3, "c"))
    before = store.transactions
    records = []
    for expected in (["m0"], ["m1"], ["m2"], ["m3"]):
        taken, run, busy = await q.turn()
        assert bodies(run) == expected and not busy
        records.append(q.succeed(taken))
    assert store.transactions == before + 1  # the claim ahead; no turn waited for a record
    await asyncio.gather(*(r for r in records if r is not None))
    assert q.offsets[-1] == 4
    assert await store.claim("G", ["a", "b", "c"], "other", 1000) == [Claim.CONSUMED] * 3


async def test_a_key_consumed_elsewhere_among_the_claimed_ahead_is_skipped(
        store: GatedStore, guard: Guard) -> None:
    await store.claim("G", ["b"], "elsewhere", 60_000)
    await store.finish("G", ["b"], "elsewhere", True)
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"), msg(2, "c"))
    seen: list[str] = []
    records = []
    for _ in range(3):
        taken, run, busy = await q.turn()
        assert not busy
        seen += bodies(run)
        records.append(q.succeed(taken))
    assert seen == ["m0", "m2"]
    await asyncio.gather(*(r for r in records if r is not None))
    assert q.offsets[-1] == 3


async def test_the_same_key_later_in_the_queue_follows_the_earlier_outcome(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"), msg(2, "a"))
    q.pull(msg(3, "b"), msg(4, "d"))
    seen: list[str] = []
    for _ in range(5):
        taken, run, busy = await q.turn()
        assert not busy
        seen += bodies(run)
        q.succeed(taken)
    assert seen == ["m0", "m1", "m4"]
    q.pull(msg(5, "a"), msg(6, "a"))  # one listener call with the same key twice
    taken, run, busy = await q.turn(2)
    assert bodies(run) == [] and not busy  # "a" was consumed at offset 0


async def test_a_busy_key_suspends_its_turn_and_is_claimed_again_at_the_next(
        store: GatedStore, guard: Guard) -> None:
    await store.claim("G", ["b"], "elsewhere", 60_000)
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"))
    taken, run, busy = await q.turn()
    q.succeed(taken)
    taken, run, busy = await q.turn()
    assert busy and run == []
    q.keys.finished(taken, False, True)  # the service suspends the queue
    q.pq.make_consume_again(taken)
    await store.finish("G", ["b"], "elsewhere", False)  # the other consumer gives up
    taken, run, busy = await q.turn()
    assert bodies(run) == ["m1"] and not busy


async def test_a_suspended_message_keeps_its_key_held_until_it_is_reconsumed(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"))
    taken, run, busy = await q.turn()
    q.keys.finished(taken, False, True)  # SUSPEND_CURRENT_QUEUE_A_MOMENT
    q.pq.make_consume_again(taken)
    assert await store.claim("G", ["a"], "other", 1000) == [Claim.BUSY]
    before = store.transactions
    taken, run, busy = await q.turn()  # reconsumed: no claim again
    assert bodies(run) == ["m0"] and store.transactions == before
    q.succeed(taken)
    taken, run, busy = await q.turn()
    assert bodies(run) == ["m1"] and not busy
    q.keys.finished(taken, False, False)  # its last reconsume: sent to the retry topic
    q.keys.commit(q.pq.commit(), None)
    assert await store.claim("G", ["a", "b"], "other", 1000) == [Claim.CONSUMED, Claim.NEW]


async def test_the_offset_waits_for_the_records_before_it(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, None), msg(2, "c"))
    store.gate.clear()  # CONSUMED records do not reach the disk for now
    taken, _, _ = await q.turn()
    record = q.succeed(taken)
    taken, _, _ = await q.turn()
    assert q.succeed(taken) is None  # keyless: nothing to record, but behind "a"
    assert q.offsets == []
    store.gate.set()
    assert record is not None
    await record  # its callbacks, the offset's first, have run
    assert q.offsets == [2]


async def test_a_failed_record_drops_the_queue_without_moving_its_offset(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"))
    store.fail = True
    taken, _, _ = await q.turn()
    record = q.succeed(taken)
    assert record is not None
    with pytest.raises(OSError):
        await record
    assert q.failed and q.offsets == []


async def test_a_dropped_queue_releases_the_keys_that_never_ran(
        store: GatedStore, guard: Guard) -> None:
    q = Queue(guard)
    q.pull(msg(0, "a"), msg(1, "b"), msg(2, "c"))
    taken, run, busy = await q.turn()
    assert bodies(run) == ["m0"] and not busy  # "a" is with the listener
    q.pq.dropped = True
    q.keys.drop()
    assert await store.claim("G", ["a", "b", "c"], "other", 1000) == [
        Claim.BUSY, Claim.NEW, Claim.NEW]
    record = q.keys.finished(taken, True, False)  # the listener's success still counts
    assert record is not None
    await record
    assert await store.claim("G", ["a"], "other", 1000) == [Claim.CONSUMED]
