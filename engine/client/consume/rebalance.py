"""`Rebalancer`: which queues of each subscribed topic this consumer holds (client-behaviour §5).

How this works: per topic, broadcasting consumers take every readable queue; clustering
consumers ask one broker of the topic for the group's client ids and let the allocation
strategy pick their share of the sorted queue list.  The share is then applied to the table
of process queues:

  * a queue no longer held is marked dropped and handed to `queue_removed` (commit its
    offset, unlock it); it leaves the table only when that succeeds (an orderly queue still
    being consumed stays until a later round);
  * a push consumer's queue not pulled for 120 s is dropped the same way and comes back on
    a later round;
  * a newly held queue gets its start offset (and, orderly, its broker lock) from
    `queue_added`, which may decline it for this round.

When the table changed, `assignment_changed` runs before the new queues start pulling, so
a push consumer's new subscription version reaches the brokers first.  Queues of topics no
longer subscribed are dropped without ceremony.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from engine.client.consume.allocate import AllocateStrategy
from engine.client.consume.process_queue import ProcessQueue
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.message_queue import MessageQueue

if TYPE_CHECKING:
    from engine.client.core.instance import ClientInstance

log = logging.getLogger(__name__)


class RebalanceHooks(Protocol):
    async def queue_added(self, mq: MessageQueue) -> tuple[ProcessQueue, int] | None:
        """A process queue and its first pull offset, or None to skip the queue this round."""

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Release a queue (it is already marked dropped); False keeps it for another try."""

    async def assignment_changed(self, topic: str, mq_all: frozenset[MessageQueue],
                                 mine: frozenset[MessageQueue]) -> None:
        """The held queues of `topic` changed."""

    def start_pulling(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Begin pulling a newly held queue from `offset`."""


class Rebalancer:
    def __init__(self, instance: ClientInstance, group: str, model: MessageModel,
                 strategy: AllocateStrategy, hooks: RebalanceHooks, *,
                 drop_idle: bool) -> None:
        self.instance = instance
        self.group = group
        self.model = model
        self.strategy = strategy
        self.hooks = hooks
        self.drop_idle = drop_idle
        self.table: dict[MessageQueue, ProcessQueue] = {}

    async def rebalance(self, topics: Iterable[str]) -> None:
        wanted = set(topics)
        for topic in sorted(wanted):
            try:
                await self._topic(topic)
            except Exception:
                log.exception("rebalance of %s for %s failed", topic, self.group)
        for mq in [mq for mq in self.table if mq.topic not in wanted]:
            self.table.pop(mq).dropped = True
            log.info("%s: %s dropped, its topic is no longer subscribed", self.group, mq)

    async def allocation(self, topic: str) -> frozenset[MessageQueue] | None:
        """This consumer's share of `topic`, or None when it cannot be decided now."""
        mq_all = self.instance.routes.subscribe_queues(topic)
        if not mq_all:
            await self.instance.update_route(topic)
            mq_all = self.instance.routes.subscribe_queues(topic)
        if not mq_all:
            if not topic.startswith("%RETRY%"):
                log.warning("%s: no route for %s; nothing to rebalance", self.group, topic)
            return None
        if self.model is MessageModel.BROADCASTING:
            return mq_all
        cids = await self.instance.consumer_ids(topic, self.group)
        if not cids:
            return None
        try:
            mine = self.strategy.allocate(self.group, self.instance.client_id, sorted(mq_all),
                                          sorted(cids))
        except ValueError as exc:
            log.warning("%s: allocation %s failed: %s", self.group, self.strategy.name, exc)
            return None
        return frozenset(mine)

    async def _topic(self, topic: str) -> None:
        mine = await self.allocation(topic)
        if mine is None:
            return
        changed = False
        for mq, pq in [(mq, pq) for mq, pq in self.table.items() if mq.topic == topic]:
            if mq in mine and not (self.drop_idle and pq.pull_expired()):
                continue
            if mq in mine:
                log.warning("%s: %s not pulled for 120 s; dropped", self.group, mq)
            pq.dropped = True
            if await self.hooks.queue_removed(mq, pq):
                self.table.pop(mq, None)
                changed = True
        new: list[tuple[MessageQueue, ProcessQueue, int]] = []
        for mq in sorted(mine - self.table.keys()):
            added = await self.hooks.queue_added(mq)
            if added is None:
                continue
            pq, offset = added
            self.table[mq] = pq
            new.append((mq, pq, offset))
            changed = True
        if changed:
            log.info("%s: rebalanced %s, holding %d of %d queues", self.group, topic,
                     len(mine), len(self.instance.routes.subscribe_queues(topic)))
            await self.hooks.assignment_changed(
                topic, self.instance.routes.subscribe_queues(topic), mine)
        for mq, pq, offset in new:
            if not pq.dropped:
                self.hooks.start_pulling(mq, pq, offset)

    def drop_all(self) -> None:
        for pq in self.table.values():
            pq.dropped = True
        self.table.clear()
