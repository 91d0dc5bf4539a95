"""`dedupe.consume_concurrently` on its own: the consume requests of one pull over a real
SQLite key store, without a broker (what each request's status and acknowledgement become)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.client import dedupe
from engine.client.dedupe import Claim, Dedupe, Guard
from engine.client.dedupe_sqlite import SqliteKeyStore
from engine.client.message import MessageExt
from engine.client.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.protocol.body.message_queue import MessageQueue

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
MQ = MessageQueue("T", "broker-a", 0)


def msg(offset: int, key: str | None) -> MessageExt:
    host = ("127.0.0.1", 10911)
    return MessageExt("T", f"m{offset}".encode(), {"KEYS": key} if key else {}, "broker-a", 0,
                      offset, 0, 0, 0, 0, host, 0, host, 0, 0)


def requests(*batches: list[MessageExt]) -> list[dedupe.Request]:
    return [(b, ConsumeConcurrentlyContext(MQ)) for b in batches]


async def consumed_earlier(guard: Guard, key: str) -> None:
    await guard.dedupe.store.claim("G", [key], "earlier", 60_000)
    await guard.consumed([key])


@pytest.fixture
async def guard(tmp_path: Path) -> AsyncIterator[Guard]:
    store = SqliteKeyStore(tmp_path / "keys.db")
    try:
        yield Guard(Dedupe(store), "G", "me")
    finally:
        await store.close()


async def test_one_pull_runs_new_keys_skips_consumed_ones_and_retries_busy_ones(
        guard: Guard) -> None:
    await consumed_earlier(guard, "done")
    seen: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        return OK

    statuses = await dedupe.consume_concurrently(listener, guard, requests(
        [msg(0, "k1")], [msg(1, "k1")], [msg(2, "done")], [msg(3, None)]))
    assert statuses == [OK, LATER, OK, OK]  # the same key twice in one pull: one runs
    assert seen == ["m0", "m3"]
    assert await guard.dedupe.store.claim("G", ["k1"], "other", 1000) == [Claim.CONSUMED]


async def test_a_batch_sees_its_new_messages_and_acknowledges_by_its_own_index(
        guard: Guard) -> None:
    await consumed_earlier(guard, "b")
    seen: list[str] = []

    def first_only(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                   ) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        ctx.ack_index = 0  # only the first message it saw succeeded
        ctx.delay_level_when_next_consume = 5
        return OK

    ((_, ctx),) = reqs = requests([msg(0, "a"), msg(1, "b"), msg(2, "c")])
    assert await dedupe.consume_concurrently(first_only, guard, reqs) == [OK]
    assert seen == ["m0", "m2"]  # "b" was consumed before
    assert ctx.ack_index == 0 and ctx.delay_level_when_next_consume == 5
    store = guard.dedupe.store
    assert await store.claim("G", ["a", "c"], "other", 1000) == [Claim.CONSUMED, Claim.NEW]


async def test_a_raising_listener_releases_its_keys(guard: Guard) -> None:
    def broken(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        raise RuntimeError("boom")

    assert await dedupe.consume_concurrently(broken, guard, requests([msg(0, "k")])) == [LATER]
    assert await guard.dedupe.store.claim("G", ["k"], "other", 1000) == [Claim.NEW]


async def test_coroutine_listeners_share_the_slots_and_record_each_outcome(
        guard: Guard) -> None:
    slots = asyncio.Semaphore(1)
    running = 0
    most = 0

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                       ) -> ConsumeConcurrentlyStatus:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1
        return LATER if msgs[0].queue_offset == 1 else OK

    statuses = await dedupe.consume_concurrently(
        listener, guard, requests([msg(0, "x")], [msg(1, "y")], [msg(2, "z")]), slots)
    assert statuses == [OK, LATER, OK] and most == 1
    assert await guard.dedupe.store.claim("G", ["x", "y", "z"], "other", 1000) == [
        Claim.CONSUMED, Claim.NEW, Claim.CONSUMED]
