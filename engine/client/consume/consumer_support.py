"""What push and lite pull consumers share: membership, offsets, queue locks, task bookkeeping.

How this works: a consumer owns its client instance unless given one; `_start_member`
registers it, loads its offset store, fetches the routes of its topics, checks non-TAG
subscriptions with a broker (CHECK_CLIENT_CONFIG, as Java's `checkClientInBroker`) and
heartbeats; `_stop_member` undoes that.  Background coroutines go through `spawn`, so
shutdown (`settle`) can wait for listener work and cancel delays and relocks.
Queue locks are taken per broker with LOCK_BATCH_MQ at that broker's master.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from engine.client.consume.local_offset_store import LocalFileOffsetStore
from engine.client.consume.offset_store import OffsetStore, RemoteBrokerOffsetStore
from engine.client.consume.process_queue import ProcessQueue, now_ms
from engine.client.consume.rebalance import Rebalancer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientError
from engine.client.core.instance import ClientInstance
from engine.protocol.body.heartbeat import ExpressionType, MessageModel, SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import MASTER_ID

log = logging.getLogger(__name__)

QueueListener = Callable[[str, frozenset[MessageQueue]], None]


class ConsumerSupport:
    rebalancer: Rebalancer

    def __init__(self, group: str, config: ClientConfig, instance: ClientInstance | None,
                 *, message_model: MessageModel, store_dir: str | None,
                 check_client: bool) -> None:
        self.group = group
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(config)
        self.message_model = message_model
        self._check_client = check_client
        self.offset_store: OffsetStore
        if message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(store_dir, self.instance.client_id, group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self.instance, group)
        self.running = False
        self.stopping = False
        self.queue_listeners: list[QueueListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._work: set[asyncio.Task[Any]] = set()
        self._changed: asyncio.Event | None = None

    def subscriptions(self) -> Iterable[SubscriptionData]:
        raise NotImplementedError

    # ------------------------------------------------------------------ membership

    async def _start_member(self) -> None:
        self.instance.register_consumer(self)  # type: ignore[arg-type]
        try:
            await self.offset_store.load()
            await self.instance.start()
            for sub in self.subscriptions():
                await self.instance.update_route(sub.topic)
            if self._check_client:
                await self._check_subscriptions()
        except BaseException:
            self.instance.consumers.pop(self.group, None)
            if self._own_instance:
                await self.instance.release()
            raise
        self.running = True
        self.stopping = False
        await self.instance.heartbeat_all()

    async def _check_subscriptions(self) -> None:
        """CHECK_CLIENT_CONFIG for every non-TAG subscription (raises the broker's refusal)."""
        for sub in self.subscriptions():
            if sub.expression_type is ExpressionType.TAG:
                continue
            addr = self.instance.routes.any_addr_of_topic(sub.topic)
            if addr is not None:
                await self.instance.api.check_client_config(addr, self.group,
                                                            self.instance.client_id, sub)

    async def _stop_member(self) -> None:
        await self.settle(0)
        self.running = False
        await self.instance.unregister(consumer_group=self.group)
        if self._own_instance:
            await self.instance.release()

    # ------------------------------------------------------------------ tasks

    def spawn(self, coro: Coroutine[Any, Any, Any], *, work: bool = False
              ) -> asyncio.Task[Any]:
        """Run `coro` in the background: `work` (a listener and what completes it) is waited
        for at shutdown; anything else (delays, relocks) is cancelled."""
        task = asyncio.get_running_loop().create_task(coro)
        tasks = self._work if work else self._tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    async def settle(self, timeout: float) -> None:
        """Cancel the timers, let listener work finish for up to `timeout` s, cancel the rest."""
        for task in list(self._tasks):
            task.cancel()
        if self._work and timeout > 0:
            await asyncio.wait(list(self._work), timeout=timeout)
        for task in list(self._work):
            task.cancel()
        pending = list(self._tasks) + list(self._work)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # ------------------------------------------------------------------ offsets, assignment

    async def persist_offsets(self) -> None:
        await self.offset_store.persist_all(self.rebalancer.table)

    def assignment(self) -> set[MessageQueue]:
        return set(self.rebalancer.table)

    def notify_assignment(self, topic: str, mine: frozenset[MessageQueue]) -> None:
        for listener in self.queue_listeners:
            try:
                listener(topic, mine)
            except Exception:
                log.exception("%s: queue listener failed", self.group)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_for_assignment(self, predicate: Callable[[set[MessageQueue]], bool],
                                  timeout: float = 10.0) -> set[MessageQueue]:
        """Wait until the held queues satisfy `predicate` (raises TimeoutError)."""
        async with asyncio.timeout(timeout):
            while not predicate(self.assignment()):
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()
        return self.assignment()

    # ------------------------------------------------------------------ queue locks

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, set[MessageQueue]]:
        out: dict[str, set[MessageQueue]] = {}
        for mq in mqs:
            out.setdefault(mq.broker_name, set()).add(mq)
        return out

    async def _lock(self, broker: str, mqs: set[MessageQueue]) -> set[MessageQueue] | None:
        found = self.instance.routes.subscribe_addr(broker, MASTER_ID, only_this=True)
        if found is None:
            return None
        try:
            return await self.instance.api.lock_batch(found.addr, self.group,
                                                      self.instance.client_id, mqs)
        except ClientError as exc:
            log.warning("%s: locking %d queues on %s failed: %s", self.group, len(mqs),
                        broker, exc)
            return None

    async def lock_one(self, mq: MessageQueue, pq: ProcessQueue | None = None) -> bool:
        locked = await self._lock(mq.broker_name, {mq})
        if not locked:
            return False
        for m in locked:
            target = self.rebalancer.table.get(m) or (pq if m == mq else None)
            if target is not None:
                target.locked, target.last_lock_ms = True, now_ms()
        return mq in locked

    async def lock_all(self) -> None:
        """Renew the locks of every held queue; queues not granted are marked unlocked."""
        for broker, mqs in self._by_broker(self.rebalancer.table).items():
            locked = await self._lock(broker, mqs)
            if locked is None:
                continue
            now = now_ms()
            for mq in mqs:
                pq = self.rebalancer.table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked, pq.last_lock_ms = True, now
                elif pq.locked:
                    log.warning("%s: lost the lock of %s", self.group, mq)
                    pq.locked = False

    async def unlock(self, mqs: Iterable[MessageQueue], *, oneway: bool) -> None:
        for broker, group_mqs in self._by_broker(mqs).items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch(addr, self.group, self.instance.client_id,
                                                     group_mqs, oneway=oneway)
            except ClientError as exc:
                log.warning("%s: unlocking queues on %s failed: %s", self.group, broker, exc)
            for mq in group_mqs:
                pq = self.rebalancer.table.get(mq)
                if pq is not None:
                    pq.locked = False

    async def unlock_all(self, *, oneway: bool) -> None:
        await self.unlock(list(self.rebalancer.table), oneway=oneway)
