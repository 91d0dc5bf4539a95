"""`RebalanceLockManager`: which client of a group holds each queue, for orderly consumption.

A queue is granted to a client when it is free, already held by that client (the lock is
renewed), or held by another client whose lock has not been renewed for 60 s
(`rocketmq.broker.rebalance.lockMaxLiveTime`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.protocol.body.message_queue import MessageQueue

LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], int], max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.clock = clock
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, _Lock]] = {}

    def _expired(self, lock: _Lock, now: int) -> bool:
        return now - lock.last_update_ms > self.max_live_ms

    def try_lock_batch(self, group: str, queues: Iterable[MessageQueue],
                       client_id: str) -> set[MessageQueue]:
        """Lock what can be locked for `client_id`; returns the queues it now holds."""
        now = self.clock()
        locks = self.table.setdefault(group, {})
        granted: set[MessageQueue] = set()
        for mq in queues:
            lock = locks.get(mq)
            if lock is None or lock.client_id == client_id or self._expired(lock, now):
                locks[mq] = _Lock(client_id, now)
                granted.add(mq)
        return granted

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in queues:
            lock = locks.get(mq)
            if lock is not None and lock.client_id == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        lock = self.table.get(group, {}).get(mq)
        return (lock is not None and lock.client_id == client_id
                and not self._expired(lock, self.clock()))
