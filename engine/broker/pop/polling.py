"""`PopPolling`: POP and NOTIFICATION requests held until a message arrives (5.3
`PopLongPollingService`).

How this works: a request that found nothing registers a waiter under `topic@group@queueId`
(queueId -1 for a pop over all queues) and awaits it until its poll time runs out.  The waiter
is woken when a message is stored in a topic it would pop from (the topic, the group's pop
retry topics), or when a FIFO ack frees its queue; the request then runs again.  While anyone
waits the service listens to the store's arrivals; otherwise it costs the put path nothing.
Limits as 5.3: more than `maxPopPollingSize` waiters in all, or more than `popPollingSize` on
one key, or more than `popPollingMapSize` keys, and the request is answered POLLING_FULL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.broker.config import BrokerConfig
from engine.broker.pop.names import polling_key
from engine.store.message_store import MessageStore


@dataclass(slots=True)
class Waiter:
    key: str
    watched: tuple[str, ...]
    queue_id: int
    event: asyncio.Event = field(default_factory=asyncio.Event)


class PopPolling:
    def __init__(self, store: MessageStore, config: Callable[[], BrokerConfig]) -> None:
        self.store = store
        self.config = config
        self._by_key: dict[str, list[Waiter]] = {}
        #: concrete topic -> waiters that pop from it
        self._by_topic: dict[str, list[Waiter]] = {}
        self._total = 0
        self._listening = False
        #: Set at shutdown: held requests answer now and no new one is held.
        self.closed = False

    @property
    def total(self) -> int:
        return self._total

    def count(self, topic: str, group: str, queue_id: int) -> int:
        """How many requests are held for a key (POLLING_INFO)."""
        return len(self._by_key.get(polling_key(topic, group, queue_id), ()))

    def full(self, topic: str, group: str, queue_id: int) -> bool:
        cfg = self.config()
        if self._total >= cfg.max_pop_polling_size:
            return True
        key = polling_key(topic, group, queue_id)
        held = self._by_key.get(key)
        if held is None:
            return len(self._by_key) >= cfg.pop_polling_map_size
        return len(held) > cfg.pop_polling_size

    async def wait(self, topic: str, group: str, queue_id: int, watched: Iterable[str],
                   timeout_ms: int) -> bool:
        """Hold until woken or `timeout_ms` passed; True when woken."""
        if self.closed:
            return False
        waiter = Waiter(polling_key(topic, group, queue_id), tuple(dict.fromkeys(watched)),
                        queue_id)
        self._add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.event.wait(), max(timeout_ms, 0) / 1000)
            return waiter.event.is_set()
        finally:
            self._remove(waiter)

    def notify(self, topic: str, queue_id: int) -> None:
        """Wake the requests that would pop from `topic` queue `queue_id`."""
        for waiter in self._by_topic.get(topic, ()):
            if waiter.queue_id < 0 or waiter.queue_id == queue_id or waiter.watched[0] != topic:
                waiter.event.set()

    def notify_key(self, topic: str, group: str, queue_id: int) -> None:
        """Wake the requests of one group on one queue (and its all-queue pops)."""
        for qid in (queue_id, -1):
            for waiter in self._by_key.get(polling_key(topic, group, qid), ()):
                waiter.event.set()

    def wake_all(self, *, close: bool = True) -> None:
        """Run every held request again now; with `close` (shutdown) none is held again."""
        self.closed = self.closed or close
        for waiters in self._by_key.values():
            for waiter in waiters:
                waiter.event.set()

    def _arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic in self._by_topic:
            self.notify(topic, queue_id)

    def _add(self, waiter: Waiter) -> None:
        self._by_key.setdefault(waiter.key, []).append(waiter)
        for topic in waiter.watched:
            self._by_topic.setdefault(topic, []).append(waiter)
        self._total += 1
        if not self._listening:
            self.store.add_arrival_listener(self._arrived)
            self._listening = True

    def _remove(self, waiter: Waiter) -> None:
        _discard(self._by_key, waiter.key, waiter)
        for topic in waiter.watched:
            _discard(self._by_topic, topic, waiter)
        self._total -= 1
        if not self._total and self._listening:
            with contextlib.suppress(ValueError):
                self.store.dispatcher.waiters.listeners.remove(self._arrived)
            self._listening = False


def _discard(table: dict[str, list[Waiter]], key: str, waiter: Waiter) -> None:
    waiters = table.get(key)
    if waiters is None:
        return
    with contextlib.suppress(ValueError):
        waiters.remove(waiter)
    if not waiters:
        del table[key]
