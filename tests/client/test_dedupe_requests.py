"""The consume requests of one pull under `Dedupe`: a real `DedupeConcurrentlyService` over a
real SQLite key store, without a broker (a broadcasting consumer, so nothing is sent back):
what each request's status and acknowledgement become."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.client.consume.consumer_options import ConcurrentListener, ConsumerOptions
from engine.client.consume.dedupe import Claim, Dedupe, Guard
from engine.client.consume.dedupe_services import DedupeConcurrentlyService
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.message_queue import MessageQueue

from .test_dedupe_ahead import GatedStore

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
MQ = MessageQueue("T", "broker-a", 0)


def msg(offset: int, key: str | None) -> MessageExt:
    host = ("127.0.0.1", 10911)
    return MessageExt("T", f"m{offset}".encode(), {"KEYS": key} if key else {}, "broker-a", 0,
                      offset, 0, 0, 0, 0, host, 0, host, 0, 0)


class Acknowledged(DedupeConcurrentlyService):
    """The real service, remembering what each request was acknowledged with."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.acks: list[tuple[list[str], Any, ConsumeConcurrentlyContext]] = []
        self.changed = asyncio.Event()

    def acknowledge(self, status: Any, msgs: list[MessageExt], pq: ProcessQueue,
                    mq: MessageQueue, ctx: ConsumeConcurrentlyContext) -> None:
        self.acks.append(([m.body.decode() for m in msgs], status, ctx))
        self.changed.set()
        super().acknowledge(status, msgs, pq, mq, ctx)

    async def pull(self, *msgs: MessageExt) -> list[tuple[list[str], Any,
                                                           ConsumeConcurrentlyContext]]:
        """Submit `msgs` as one pull; their requests' acknowledgements, in request order."""
        pq = ProcessQueue()
        pq.put(list(msgs))
        self.acks.clear()
        size = self.consumer.options.consume_message_batch_max_size
        requests = (len(msgs) + size - 1) // size
        self.submit(list(msgs), pq, MQ, True)
        async with asyncio.timeout(60):
            while len(self.acks) < requests:
                self.changed.clear()
                await self.changed.wait()
        order = {m.queue_offset: i for i, m in enumerate(msgs)}
        return sorted(self.acks, key=lambda a: order[int(a[0][0][1:])])


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[GatedStore]:
    s = GatedStore(tmp_path / "keys.db")
    try:
        yield s
    finally:
        s.gate.set()
        await s.close()


@pytest.fixture
def service(tmp_path: Path, store: GatedStore) -> Any:
    def make(listener: ConcurrentListener, **options: Any) -> Acknowledged:
        consumer = PushConsumer("G", ClientConfig(namesrv_addr="127.0.0.1:9"), options=(
            ConsumerOptions(message_model=MessageModel.BROADCASTING,
                            local_offset_store_dir=str(tmp_path / "offsets"), **options)))
        guard = Guard(Dedupe(store), "G", "me")
        return Acknowledged(consumer, listener, guard)

    return make


async def consumed_earlier(store: GatedStore, key: str) -> None:
    await store.claim("G", [key], "earlier", 60_000)
    await store.finish("G", [key], "earlier", True)


async def test_one_pull_runs_new_keys_skips_consumed_ones_and_retries_busy_ones(
        store: GatedStore, service: Any) -> None:
    await consumed_earlier(store, "done")
    seen: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        return OK

    acks = await service(listener).pull(msg(0, "k1"), msg(1, "k1"), msg(2, "done"),
                                        msg(3, None))
    assert [s for _, s, _ in acks] == [OK, LATER, OK, OK]  # the same key twice: one runs
    assert seen == ["m0", "m3"]
    assert await store.claim("G", ["k1"], "other", 1000) == [Claim.CONSUMED]


async def test_a_batch_sees_its_new_messages_and_acknowledges_by_its_own_index(
        store: GatedStore, service: Any) -> None:
    await consumed_earlier(store, "b")
    seen: list[str] = []

    def first_only(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                   ) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        ctx.ack_index = 0  # only the first message it saw succeeded
        ctx.delay_level_when_next_consume = 5
        return OK

    ((_, status, ctx),) = await service(first_only, consume_message_batch_max_size=3).pull(
        msg(0, "a"), msg(1, "b"), msg(2, "c"))
    assert status is OK
    assert seen == ["m0", "m2"]  # "b" was consumed before
    assert ctx.ack_index == 0 and ctx.delay_level_when_next_consume == 5
    assert await store.claim("G", ["a", "c"], "other", 1000) == [Claim.CONSUMED, Claim.NEW]


async def test_a_raising_listener_releases_its_keys(
        store: GatedStore, service: Any) -> None:
    def broken(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> None:
        raise RuntimeError("boom")

    ((_, status, _),) = await service(broken).pull(msg(0, "k"))
    assert status is LATER
    assert await store.claim("G", ["k"], "other", 1000) == [Claim.NEW]


async def test_coroutine_listeners_share_the_slots_and_record_each_outcome(
        store: GatedStore, service: Any) -> None:
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

    acks = await service(listener, consume_thread_max=1).pull(
        msg(0, "x"), msg(1, "y"), msg(2, "z"))
    assert [s for _, s, _ in acks] == [OK, LATER, OK] and most == 1
    assert await store.claim("G", ["x", "y", "z"], "other", 1000) == [
        Claim.CONSUMED, Claim.NEW, Claim.CONSUMED]


async def test_a_request_is_acknowledged_only_once_its_keys_are_recorded(
        store: GatedStore, service: Any) -> None:
    store.gate.clear()  # CONSUMED records do not reach the disk for now
    acknowledged = service(lambda msgs, ctx: OK)
    pull = asyncio.ensure_future(acknowledged.pull(msg(0, "r"), msg(1, None)))
    async with asyncio.timeout(60):
        await store.held_back.wait()
    assert [bodies for bodies, _, _ in acknowledged.acks] == [["m1"]]  # keyless: at once
    store.gate.set()
    assert [s for _, s, _ in await pull] == [OK, OK]
