"""`LitePullConsumer`: the application polls; queues come from a rebalance or from `assign`.

How this works (Java's `DefaultLitePullConsumer`): each held queue has a pull task
(`lite_pull_loop.py`) that appends what it pulls to one cache; `poll()` hands out the oldest
cached batch and records, per queue, the offset after what it handed out (the smallest
offset still cached, as for push consumers).  With `auto_commit`, `poll()` copies the
polled offsets into the offset store every `auto_commit_interval_millis` and the client
instance sends them every 5 s; `commit_sync()` copies and sends them now, answered.  `seek`
restarts a queue's pull task at another offset, dropping what was cached for it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable

from engine.client.consume import dedupe
from engine.client.consume.consume_from import (
    OffsetLookup,
    OffsetUnknownError,
    StartOffsets,
    subscription,
)
from engine.client.consume.consumer_options import LitePullOptions
from engine.client.consume.consumer_support import ConsumerSupport
from engine.client.consume.lite_pull_loop import LiteBatch, lite_pull_loop
from engine.client.consume.offset_store import ReadOffsetType
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.rebalance import Rebalancer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientStateError
from engine.client.core.instance import ClientInstance
from engine.client.core.message import MessageExt
from engine.client.core.validate import check_group
from engine.protocol.body.admin import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from engine.protocol.body.heartbeat import (
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.body.message_queue import MessageQueue

log = logging.getLogger(__name__)

BUSY_RETRY = 1.0  # seconds before a key busy in another delivery is offered again


class LitePullConsumer(ConsumerSupport):
    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, group: str, config: ClientConfig | None = None, *,
                 options: LitePullOptions | None = None,
                 instance: ClientInstance | None = None) -> None:
        check_group(group)
        self.options = o = options or LitePullOptions()
        config = config or ClientConfig()
        if o.message_model is MessageModel.CLUSTERING:
            config = config.with_pid_instance_name()
        super().__init__(group, config, instance, message_model=o.message_model,
                         store_dir=o.local_offset_store_dir,
                         check_client=o.check_client_in_broker)
        self._subs: dict[str, SubscriptionData] = {}
        self._assigned: set[MessageQueue] | None = None  # assign mode when not None
        self.rebalancer = Rebalancer(self.instance, group, o.message_model,
                                     o.allocate_strategy, self, drop_idle=False)
        self.start_offsets = StartOffsets(self.offset_store, OffsetLookup(self.instance),
                                          o.consume_from_where, o.consume_timestamp)
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self.cache: collections.deque[LiteBatch] = collections.deque()
        self._guard = (None if o.dedupe is None else
                       dedupe.Guard(o.dedupe, group, dedupe.new_owner(self.instance.client_id)))
        self._cache_event = asyncio.Event()
        self._polled: dict[MessageQueue, int] = {}
        self.paused_queues: set[MessageQueue] = set()
        self._next_commit = 0.0

    # ------------------------------------------------------------------ setup

    def subscribe(self, topic: str, expression: str | None = "*",
                  expression_type: ExpressionType = ExpressionType.TAG) -> None:
        if self._assigned is not None:
            raise ClientStateError("assign() and subscribe() cannot be mixed")
        self._subs[topic] = subscription(topic, expression, expression_type)

    async def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Pull exactly these queues (no rebalance)."""
        if self._subs and self._assigned is None:
            raise ClientStateError("assign() and subscribe() cannot be mixed")
        self._assigned = set(mqs)
        if self.running:
            await self._apply_assignment()

    def subscriptions(self) -> Iterable[SubscriptionData]:
        return tuple(self._subs.values())

    def consumer_data(self) -> ConsumerData:
        o = self.options
        return ConsumerData(self.group, self.consume_type, o.message_model,
                            o.consume_from_where, frozenset(self._subs.values()), o.unit_mode)

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of `topic` (the consumer must be running)."""
        if not self.running:
            raise ClientStateError("the lite pull consumer is not running; start() it first")
        await self.instance.update_route(topic)
        return set(self.instance.routes.subscribe_queues(topic))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.running:
            return
        self._next_commit = time.monotonic() + self.options.auto_commit_interval_millis / 1000
        await self._start_member()
        if self._assigned is not None:
            await self._apply_assignment()
        else:
            self.instance.rebalance_now()

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.stopping = True
        for task in self._pulls.values():
            task.cancel()
        await asyncio.gather(*self._pulls.values(), return_exceptions=True)
        self._pulls.clear()
        if self.options.auto_commit:
            self._copy_polled()
        await self.offset_store.persist_all(self.rebalancer.table, final=True)
        self.rebalancer.drop_all()
        self.cache.clear()
        if self._guard is not None:
            await self._guard.close()
        await self._stop_member()

    async def _apply_assignment(self) -> None:
        wanted = self._assigned or set()
        for mq in [mq for mq in self.rebalancer.table if mq not in wanted]:
            pq = self.rebalancer.table.pop(mq)
            pq.dropped = True
            await self.queue_removed(mq, pq)
        for mq in sorted(wanted - self.rebalancer.table.keys()):
            added = await self.queue_added(mq)
            if added is not None:
                self.rebalancer.table[mq] = added[0]
                self.start_pulling(mq, *added)
        self.notify_assignment("", frozenset(wanted))

    # ------------------------------------------------------------------ rebalance hooks

    async def rebalance(self) -> None:
        if self.running and not self.stopping and self._assigned is None:
            await self.rebalancer.rebalance(list(self._subs))

    async def queue_added(self, mq: MessageQueue) -> tuple[ProcessQueue, int] | None:
        self.offset_store.remove(mq)
        try:
            return ProcessQueue(), await self.start_offsets.compute(mq)
        except OffsetUnknownError as exc:
            log.info("%s: %s", self.group, exc)
            return None

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._pulls.pop(mq, None)
        if task is not None:
            task.cancel()
        self._drop_cached(mq)
        offset = self._polled.pop(mq, None)
        if offset is not None and offset >= 0:
            self.offset_store.update(mq, offset, False)
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)
        return True

    async def assignment_changed(self, topic: str, mq_all: frozenset[MessageQueue],
                                 mine: frozenset[MessageQueue]) -> None:
        self.notify_assignment(topic, mine)

    def start_pulling(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self._pulls[mq] = asyncio.get_running_loop().create_task(
            lite_pull_loop(self, mq, pq, offset), name=f"lite pull {mq}")

    def subscription_of(self, topic: str) -> SubscriptionData:
        return self._subs.get(topic) or subscription(topic, "*")

    def cache_full(self) -> bool:
        return len(self.cache) * self.options.pull_batch_size > self.options.pull_threshold_for_all

    def deliver(self, batch: LiteBatch) -> None:
        self.cache.append(batch)
        self._cache_event.set()

    # ------------------------------------------------------------------ pulling

    def _drop_cached(self, mq: MessageQueue) -> None:
        self.cache = collections.deque(b for b in self.cache if b.mq != mq)

    # ------------------------------------------------------------------ the application's side

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next pulled batch, or [] after `timeout_ms` (default `poll_timeout_millis`)."""
        if not self.running:
            raise ClientStateError("the lite pull consumer is not running; start() it first")
        if self.options.auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.options.auto_commit_interval_millis / 1e3
            self._copy_polled()
        wait = (timeout_ms if timeout_ms is not None else self.options.poll_timeout_millis) / 1e3
        try:
            async with asyncio.timeout(wait):
                while True:
                    while not self.cache:
                        self._cache_event.clear()
                        await self._cache_event.wait()
                    batch = self.cache.popleft()
                    if batch.pq.dropped or self.rebalancer.table.get(batch.mq) is not batch.pq:
                        continue
                    if self._guard is None:
                        self._polled[batch.mq] = batch.pq.remove(batch.msgs)
                        return batch.msgs
                    msgs = await self._claim(batch)
                    if msgs:
                        return msgs
        except TimeoutError:
            return []

    async def _claim(self, batch: LiteBatch) -> list[MessageExt]:
        """With `dedupe`: hand out NEW keys, skip CONSUMED ones, and keep BUSY ones cached
        (their offset is not passed) to offer again after `BUSY_RETRY` seconds."""
        assert self._guard is not None
        classified = await self._guard.classify(batch.msgs)
        busy = [m for m, _, c in classified if c is dedupe.Claim.BUSY]
        out = [m for m, _, c in classified if c is dedupe.Claim.NEW]
        waiting = {id(m) for m in busy}
        self._polled[batch.mq] = batch.pq.remove([m for m in batch.msgs if id(m) not in waiting])
        if busy:
            again = LiteBatch(batch.mq, batch.pq, busy)
            asyncio.get_running_loop().call_later(BUSY_RETRY, self.deliver, again)
        return out

    def consuming(self, msgs: list[MessageExt]) -> dedupe.Consuming:
        """``async with consumer.consuming(msgs): ...``: on success the polled messages'
        keys are recorded CONSUMED; an exception releases them (requires `dedupe`)."""
        if self._guard is None:
            raise ClientStateError("consuming() needs LitePullOptions(dedupe=Dedupe(...))")
        return dedupe.Consuming(self._guard, msgs)

    def _copy_polled(self) -> None:
        for mq, offset in self._polled.items():
            pq = self.rebalancer.table.get(mq)
            if offset >= 0 and pq is not None and not pq.dropped:
                self.offset_store.update(mq, offset, False)

    async def commit_sync(self) -> None:
        """Store the polled offsets at the brokers (or the local file) now."""
        self._copy_polled()
        await self.offset_store.persist_all(self.rebalancer.table, final=True)

    async def committed(self, mq: MessageQueue) -> int:
        return await self.offset_store.read(mq, ReadOffsetType.STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Pull `mq` from `offset` next (it must be held and within [min, max] offset)."""
        pq = self.rebalancer.table.get(mq)
        if pq is None:
            raise ClientStateError(f"{mq} is not assigned to this consumer (rebalancing?)")
        lookup = self.start_offsets.offsets
        low, high = await lookup.min_offset(mq), await lookup.max_offset(mq)
        if not low <= offset <= high:
            raise ClientStateError(f"Seek offset illegal: {offset} not in [{low}, {high}]")
        await self._restart(mq, pq, offset)

    async def _restart(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        task = self._pulls.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._drop_cached(mq)
        pq.clear()
        self._polled[mq] = offset
        self.start_pulling(mq, pq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.start_offsets.offsets.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.start_offsets.offsets.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self.paused_queues.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self.paused_queues.difference_update(mqs)

    # ------------------------------------------------------------------ broker requests

    def running_info(self) -> ConsumerRunningInfo:
        table = {mq: pq.info(self.offset_store.table.get(mq, -1))
                 for mq, pq in self.rebalancer.table.items()}
        return ConsumerRunningInfo({"consumerGroup": self.group,
                                    "PROP_CONSUME_TYPE": self.consume_type.name},
                                   list(self._subs.values()), table)

    async def consume_directly(self, body: bytes, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        return ConsumeMessageDirectlyResult(False, True, CMResult.CR_THROW_EXCEPTION,
                                            "a lite pull consumer has no listener to call")

    async def reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        for mq, offset in table.items():
            pq = self.rebalancer.table.get(mq)
            if pq is not None:
                self.offset_store.update(mq, offset, False)
                await self._restart(mq, pq, offset)
