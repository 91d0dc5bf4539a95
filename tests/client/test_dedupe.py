"""Idempotent consumption against a real broker: each business key runs the listener once.

The broker's delay levels are shortened to 1 s, so a retry comes back in about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.consume.consumer_options import ConsumerOptions, LitePullOptions
from engine.client.consume.dedupe import Claim, Dedupe, uniq_key
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from engine.client.consume.lite_pull_consumer import LitePullConsumer
from engine.client.consume.push_consumer import PushConsumer
from engine.client.consume.send_back import send_message_back
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.message_queue import MessageQueue
from tests.clock import ManualClock

from . import dedupe_victim
from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "DedupeTopic"
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class WatchedStore(SqliteKeyStore):
    """The real store, remembering every claim's answer so tests can await one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims: list[tuple[str, Claim]] = []
        self.renewed: list[str] = []
        self.consumed: list[str] = []
        self.changed = asyncio.Event()

    async def claim(self, group: str, keys: Sequence[str], owner: str,
                    lease_ms: int) -> list[Claim]:
        out = await super().claim(group, keys, owner, lease_ms)
        self.claims.extend(zip(keys, out, strict=True))
        self.changed.set()
        return out

    async def finish(self, group: str, keys: Sequence[str], owner: str,
                     consumed: bool) -> None:
        await super().finish(group, keys, owner, consumed)
        if consumed:
            self.consumed.extend(keys)
            self.changed.set()

    async def renew(self, group: str, keys: Sequence[str], owner: str,
                    lease_ms: int) -> None:
        await super().renew(group, keys, owner, lease_ms)
        self.renewed.extend(keys)
        self.changed.set()

    async def wait_for(self, key: str, claim: Claim, timeout: float = 30.0) -> None:
        await self.wait_until(lambda: (key, claim) in self.claims, timeout)

    async def wait_until(self, done: Callable[[], bool], timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> BrokerController:
    broker = await start_broker(message_delay_level="1s 1s 1s 1s")
    await make_topic(broker, TOPIC, queues=2)
    return broker


@pytest.fixture
async def producer(broker: BrokerController, client_config: ClientConfig,
                   track: Callable[[Any], Any]) -> Producer:
    p: Producer = track(Producer("DedupePG", client_config))
    await p.start()
    return p


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[WatchedStore]:
    s = WatchedStore(tmp_path / "keys.db")
    try:
        yield s
    finally:
        await s.close()


def push_consumer(group: str, config: ClientConfig, track: Callable[[Any], Any],
                  dedupe: Dedupe, instance: str = "one", **options: Any) -> PushConsumer:
    config = dataclasses.replace(config, instance_name=instance)
    options = ConsumerOptions(consume_from_where=FIRST, dedupe=dedupe, **options)
    consumer: PushConsumer = track(PushConsumer(group, config, options=options))
    consumer.subscribe(TOPIC, "*")
    return consumer


async def send_to(producer: Producer, queue: int, key: str, body: str) -> None:
    await producer.send_to_queue(Message(TOPIC, body.encode(), keys=key),
                                 MessageQueue(TOPIC, "broker-a", queue))


async def test_the_same_key_sent_twice_is_processed_once(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    inbox = Inbox()
    consumer = push_consumer("DedupeCG", client_config, track, Dedupe(store))
    consumer.register_concurrently(lambda msgs, ctx: inbox.add(msgs) or OK)
    for body in ("first", "second", "other"):
        key = "order-2" if body == "other" else "order-1"
        await send_to(producer, 0, key, body)
    await consumer.start()
    await store.wait_for("order-1", Claim.CONSUMED)
    await inbox.wait_for(2)
    assert sorted(inbox.bodies()) == ["first", "other"]


async def test_a_send_back_redelivery_of_a_consumed_key_is_not_reprocessed(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    inbox = Inbox()
    consumer = push_consumer("BackCG", client_config, track, Dedupe(store))
    consumer.register_concurrently(lambda msgs, ctx: inbox.add(msgs) or OK)
    await consumer.start()
    await send_to(producer, 0, "pay-7", "once")
    (msg,) = await inbox.wait_for(1)
    assert await send_message_back(consumer.instance, "BackCG", msg, 1, 16)
    await store.wait_for("pay-7", Claim.CONSUMED)  # the redelivery, through %RETRY%BackCG
    assert inbox.bodies() == ["once"]


async def test_two_consumers_receiving_one_key_at_once_run_the_listener_once(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    ran: list[str] = []
    release = asyncio.Event()

    async def slow(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                   ) -> ConsumeConcurrentlyStatus:
        ran.extend(m.body.decode() for m in msgs)
        await release.wait()
        return OK

    consumers = [push_consumer("PairCG", client_config, track, Dedupe(store), instance=name)
                 for name in ("a", "b")]
    for c in consumers:
        c.register_concurrently(slow)
        await c.start()
    for c in consumers:
        await c.wait_for_assignment(
            lambda qs: len({q.queue_id for q in qs if q.topic == TOPIC}) == 1)
    await send_to(producer, 0, "ship-1", "via-q0")
    await send_to(producer, 1, "ship-1", "via-q1")
    await store.wait_for("ship-1", Claim.BUSY)  # the second delivery met the first's lease
    release.set()
    await store.wait_for("ship-1", Claim.CONSUMED)  # its retry, after the first succeeded
    assert len(ran) == 1


async def test_keys_are_claimed_while_the_listener_slots_are_busy_and_kept_leased(
        tmp_path: Path, broker: BrokerController, client_config: ClientConfig,
        producer: Producer, track: Callable[[Any], Any]) -> None:
    """The store's claim and finish never hold one of the consumer's listener slots: with a
    single slot taken by a blocked listener, the next messages' keys are claimed at once,
    and their leases are renewed while they wait for the slot."""
    clock = ManualClock()
    store = WatchedStore(tmp_path / "slots.db", clock=clock)
    ran: list[str] = []
    started, release, all_ran = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def blocking(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                       ) -> ConsumeConcurrentlyStatus:
        ran.extend(m.body.decode() for m in msgs)
        started.set()
        if len(ran) == 3:
            all_ran.set()
        await release.wait()
        return OK

    config = dataclasses.replace(client_config, instance_name="slots")
    consumer: PushConsumer = track(PushConsumer("SlotsCG", config, options=ConsumerOptions(
        consume_from_where=FIRST, consume_thread_max=1,
        dedupe=Dedupe(store, lease_ms=200))))
    consumer.subscribe(TOPIC, "*")
    consumer.register_concurrently(blocking)
    try:
        for i in range(3):
            await send_to(producer, 0, f"slot-{i}", f"m{i}")
        await consumer.start()
        for i in range(3):  # the one slot is taken by the first listener
            await store.wait_for(f"slot-{i}", Claim.NEW, timeout=60)
        async with asyncio.timeout(60):
            await started.wait()
        clock.advance(150)
        await store.wait_until(lambda: {"slot-1", "slot-2"} <= set(store.renewed))
        assert len(ran) == 1  # the others still wait for the slot
        clock.advance(150)  # 300 ms after the claims, 150 after the renewal
        assert await store.claim("SlotsCG", ["slot-1", "slot-2"], "intruder", 200) == [
            Claim.BUSY, Claim.BUSY]
        release.set()
        async with asyncio.timeout(30):
            await all_ran.wait()
        assert sorted(ran) == ["m0", "m1", "m2"]
    finally:
        await store.close()


async def test_a_failure_releases_the_key_and_the_retry_runs_it(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    inbox = Inbox()
    calls: list[int] = []

    def fail_first(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                   ) -> ConsumeConcurrentlyStatus:
        calls.append(msgs[0].reconsume_times)
        if len(calls) == 1:
            raise RuntimeError("first delivery fails on purpose")
        inbox.add(msgs)
        return OK

    consumer = push_consumer("FailCG", client_config, track, Dedupe(store))
    consumer.register_concurrently(fail_first)
    await consumer.start()
    await send_to(producer, 0, "refund-3", "try")
    await inbox.wait_for(1, timeout=30)
    assert calls == [0, 1]


async def test_keys_expire_after_the_window(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        tmp_path: Path, track: Callable[[Any], Any]) -> None:
    clock = ManualClock()
    store = WatchedStore(tmp_path / "window.db", window_ms=60_000, clock=clock)
    try:
        inbox = Inbox()
        consumer = push_consumer("WindowCG", client_config, track, Dedupe(store))
        consumer.register_concurrently(lambda msgs, ctx: inbox.add(msgs) or OK)
        await consumer.start()
        await send_to(producer, 0, "k", "one")
        await inbox.wait_for(1)
        await store.wait_for("k", Claim.NEW)
        await send_to(producer, 0, "k", "inside the window")
        await store.wait_for("k", Claim.CONSUMED)
        clock.advance(60_000)
        await send_to(producer, 0, "k", "after the window")
        await inbox.wait_for(2)
        assert inbox.bodies() == ["one", "after the window"]
        await consumer.shutdown()
    finally:
        await store.close()


async def test_an_orderly_listener_runs_each_key_once(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    seen: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = push_consumer("OrderCG", client_config, track, Dedupe(store))
    consumer.register_orderly(listener)
    for i, key in enumerate(["a", "b", "a", "c", "b"]):
        await send_to(producer, 0, key, f"{key}{i}")
    await consumer.start()
    await store.wait_for("b", Claim.CONSUMED)
    await store.wait_for("c", Claim.NEW)
    assert seen[:3] == ["a0", "b1", "c3"] and len(seen) == 3


async def test_an_orderly_queue_claims_its_cached_keys_ahead_and_skips_consumed_ones(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    await store.claim("AheadCG", ["c1"], "elsewhere", 60_000)
    await store.finish("AheadCG", ["c1"], "elsewhere", True)  # another consumer's record
    before = len(store.claims)
    inbox = Inbox()
    consumer = push_consumer("AheadCG", client_config, track, Dedupe(store))
    consumer.register_orderly(lambda msgs, ctx: inbox.add(msgs) or ConsumeOrderlyStatus.SUCCESS)
    for i in range(4):
        await send_to(producer, 0, f"c{i}", f"c{i}")
    await consumer.start()
    await store.wait_until(lambda: {"c0", "c2", "c3"} <= set(store.consumed))
    assert inbox.bodies() == ["c0", "c2", "c3"]
    assert store.claims[before:] == [  # claimed ahead together, c1 consumed elsewhere
        ("c0", Claim.NEW), ("c1", Claim.CONSUMED), ("c2", Claim.NEW), ("c3", Claim.NEW)]


async def test_a_suspended_orderly_message_keeps_its_key_until_it_is_reconsumed(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    calls: list[tuple[str, int]] = []
    suspended = asyncio.Event()

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        calls.extend((m.body.decode(), m.reconsume_times) for m in msgs)
        if msgs[0].body == b"s1" and not suspended.is_set():
            suspended.set()
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = push_consumer("SuspendCG", client_config, track, Dedupe(store))
    consumer.register_orderly(listener)
    for i in range(3):
        await send_to(producer, 0, f"s{i}", f"s{i}")
    await consumer.start()
    async with asyncio.timeout(30):
        await suspended.wait()
    assert await store.claim("SuspendCG", ["s1"], "other", 1000) == [Claim.BUSY]  # held
    await store.wait_until(lambda: "s2" in store.consumed)
    assert calls == [("s0", 0), ("s1", 0), ("s1", 1), ("s2", 0)]
    assert [k for k, c in store.claims if c is Claim.NEW] == ["s0", "s1", "s2"]  # once


async def test_an_orderly_queue_dropped_mid_way_releases_the_keys_it_claimed_ahead(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def blocking(msgs: list[MessageExt], ctx: ConsumeOrderlyContext
                       ) -> ConsumeOrderlyStatus:
        started.set()
        await release.wait()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = push_consumer("DropCG", client_config, track, Dedupe(store))
    consumer.register_orderly(blocking)
    for i in range(4):
        await send_to(producer, 0, f"d{i}", f"d{i}")
    await consumer.start()
    for i in range(4):
        await store.wait_for(f"d{i}", Claim.NEW)
    async with asyncio.timeout(30):
        await started.wait()  # d0 is with the listener, d1..d3 cached and claimed
    await consumer.remove_process_queue(MessageQueue(TOPIC, "broker-a", 0))
    assert await store.claim("DropCG", ["d0", "d1", "d2", "d3"], "other", 60_000) == [
        Claim.BUSY, Claim.NEW, Claim.NEW, Claim.NEW]
    release.set()
    await store.wait_until(lambda: "d0" in store.consumed)  # its success still counts


async def test_uniq_key_deduplicates_one_stored_twice_message(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    inbox = Inbox()
    consumer = push_consumer("UniqCG", client_config, track, Dedupe(store, key=uniq_key))
    consumer.register_concurrently(lambda msgs, ctx: inbox.add(msgs) or OK)
    await consumer.start()
    msg = Message(TOPIC, b"twice").with_system_properties(
        UNIQ_KEY="0A0000010000000000000000000000AA")
    mq = MessageQueue(TOPIC, "broker-a", 0)
    await producer.send_to_queue(msg, mq)
    await producer.send_to_queue(msg, mq)  # a producer retry that stored the message twice
    await store.wait_for("0A0000010000000000000000000000AA", Claim.CONSUMED)
    assert inbox.bodies() == ["twice"]


async def test_the_lite_pull_consumer_hands_out_each_key_once(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        store: WatchedStore, track: Callable[[Any], Any]) -> None:
    options = LitePullOptions(consume_from_where=FIRST, dedupe=Dedupe(store))
    consumer: LitePullConsumer = track(LitePullConsumer("LiteCG", client_config,
                                                        options=options))
    for i, key in enumerate(["x", "y", "x"]):
        await send_to(producer, 0, key, f"{key}{i}")
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    got: list[str] = []
    while len(got) < 2:
        msgs = await consumer.poll(5000)
        assert msgs, "nothing polled"
        async with consumer.consuming(msgs):
            got.extend(m.body.decode() for m in msgs)
    assert got == ["x0", "y1"]
    # x2 was busy (x0's lease), then is offered again (a second later), found consumed and
    # skipped: a poll waiting meanwhile hands out nothing.
    polling = asyncio.create_task(consumer.poll(30_000))
    await store.wait_for("x", Claim.CONSUMED)
    assert not polling.done()
    polling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await polling
    assert await consumer.poll(100) == []


async def test_a_consumer_killed_while_consuming_leaves_the_key_to_its_lease(
        broker: BrokerController, client_config: ClientConfig, producer: Producer,
        tmp_path: Path, track: Callable[[Any], Any]) -> None:
    db = tmp_path / "shared.db"
    await send_to(producer, 0, "invoice-9", "payload")
    victim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.client.dedupe_victim", client_config.namesrv_addr or "",
        str(db), "KillCG", TOPIC, stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2])
    try:
        assert victim.stdout is not None
        async with asyncio.timeout(30):
            line = await victim.stdout.readline()
        assert line.split() == [b"consuming", b"invoice-9"]
    finally:
        victim.kill()
        await victim.wait()
    clock = ManualClock(int(time.time() * 1000))
    store = WatchedStore(db, clock=clock)
    try:
        inbox = Inbox()
        consumer = push_consumer("KillCG", client_config, track, Dedupe(store))
        consumer.register_concurrently(lambda msgs, ctx: inbox.add(msgs) or OK)
        await consumer.start()
        await store.wait_for("invoice-9", Claim.BUSY)  # the dead consumer's lease holds
        assert inbox.messages == []
        clock.advance(dedupe_victim.LEASE_MS)
        (msg,) = await inbox.wait_for(1)  # the retry after the lease ran out
        assert msg.body == b"payload"
        await consumer.shutdown()
    finally:
        await store.close()
