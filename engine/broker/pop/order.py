"""`ConsumerOrderInfoManager`: FIFO pops, one popper per queue at a time (5.3's order info).

How this works: a FIFO pop keeps no checkpoint.  It records, per topic@group and queue, which
offsets it handed out, when, for how long, and under which `attemptId`; until every one of them
is acked (or its invisible time passes) the queue is blocked to every other pop, except a pop
that retries with the same attempt id.  Acks set bits (`cm`); when the lowest unacked offset
moves the group's consumer offset follows it.  A queue popped again re-delivers the same
offsets, and their pop counts (`oc`) go up: the answer's orderCountInfo reports them.  The
table is persisted as consumerOrderInfo.json in 5.3's shape (fastjson, short keys).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.broker.persist import Persister
from engine.protocol import receipt
from engine.store.config_files import JsonConfigFile

log = logging.getLogger(__name__)

FILE_NAME = "consumerOrderInfo.json"
CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000
#: commit_and_next: the offset is not one of the popped ones / the pop time does not match.
ILLEGAL = -1
NO_NEED = -2


def build_offset_list(offsets: list[int]) -> list[int]:
    """5.3's compact list: the first offset, then the others relative to it."""
    if len(offsets) <= 1:
        return list(offsets)
    first = offsets[0]
    return [first, *(o - first for o in offsets[1:])]


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offset_list: list[int]
    last_consume_timestamp: int
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] = field(default_factory=dict)
    offset_consumed_count: dict[int, int] = field(default_factory=dict)

    def queue_offset(self, index: int) -> int:
        if index == 0:
            return self.offset_list[0]
        return self.offset_list[0] + self.offset_list[index]

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offset_list))]

    def is_not_ack(self, index: int) -> bool:
        return not self.commit_offset_bit >> index & 1

    def _visible_at(self, index: int) -> int:
        base = self.pop_time + (self.invisible_time or 0)
        return self.offset_next_visible_time.get(self.queue_offset(index), base)

    def need_block(self, attempt_id: str | None, invisible_time: int, now: int) -> bool:
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if not self.invisible_time or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        return any(self.is_not_ack(i) and now < self._visible_at(i)
                   for i in range(len(self.offset_list)))

    def inflight(self, now: int) -> int:
        """Offsets handed out, not acked, still invisible."""
        return sum(1 for i in range(len(self.offset_list))
                   if self.is_not_ack(i) and now < self._visible_at(i))

    def held_until(self, now: int) -> int | None:
        """When the earliest unacked offset still invisible becomes visible, if any."""
        times = [t for i in range(len(self.offset_list))
                 if self.is_not_ack(i) and now < (t := self._visible_at(i))]
        return min(times) if times else None

    def next_offset(self) -> int:
        if not self.offset_list:
            return NO_NEED
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def merge_consumed_count(self, previous: OrderInfo) -> None:
        if previous.attempt_id is not None and previous.attempt_id == self.attempt_id:
            self.offset_consumed_count = previous.offset_consumed_count
            return
        before = set(previous.queue_offsets())
        self.offset_consumed_count = {
            o: previous.offset_consumed_count.get(o, 0) + 1
            for o in self.queue_offsets() if o in before}

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"popTime": self.pop_time, "i": self.invisible_time,
                               "o": self.offset_list, "l": self.last_consume_timestamp,
                               "cm": self.commit_offset_bit}
        if self.offset_next_visible_time:
            doc["ot"] = dict(self.offset_next_visible_time)
        if self.offset_consumed_count:
            doc["oc"] = dict(self.offset_consumed_count)
        if self.attempt_id is not None:
            doc["a"] = self.attempt_id
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> OrderInfo:
        invisible = doc.get("i", doc.get("invisibleTime"))
        return cls(int(doc.get("popTime", 0)), None if invisible is None else int(invisible),
                   [int(o) for o in doc.get("o", doc.get("offsetList")) or []],
                   int(doc.get("l", doc.get("lastConsumeTimestamp", 0))),
                   int(doc.get("cm", doc.get("commitOffsetBit", 0))),
                   doc.get("a", doc.get("attemptId")),
                   {int(k): int(v) for k, v in (doc.get("ot") or {}).items()},
                   {int(k): int(v) for k, v in (doc.get("oc") or {}).items()})


def _key(topic: str, group: str) -> str:
    return f"{topic}@{group}"


class ConsumerOrderInfoManager:
    def __init__(self, config_dir: str, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self.file = JsonConfigFile(f"{config_dir}/{FILE_NAME}")
        #: Lets the persister drop entries of topics and groups that no longer exist.
        self.exists: Callable[[str, str, int], bool] = lambda topic, group, queue_id: True
        self._persister = Persister(self._snapshot, self.file.persist, FILE_NAME)

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        """Read consumerOrderInfo.json (or its .bak); a bad entry is dropped with a log line.

        Raises:
            ConfigFileError: the file exists but cannot be decoded.
        """
        doc = self.file.load() or {}
        for key, queues in (doc.get("table") or {}).items():
            for queue_id, info in (queues or {}).items():
                try:
                    self.table.setdefault(str(key), {})[int(queue_id)] = OrderInfo.from_json(info)
                except (TypeError, ValueError, AttributeError) as exc:
                    log.error("%s: order info of %s queue %s dropped: %s", FILE_NAME, key,
                              queue_id, exc)

    def persist(self) -> None:
        self._persister.request()

    def flush(self) -> None:
        self._persister.flush()

    async def wait_persisted(self) -> None:
        await self._persister.wait()

    def _snapshot(self) -> dict[str, Any]:
        self._auto_clean()
        return {"table": {key: {q: info.to_json() for q, info in queues.items()}
                          for key, queues in self.table.items()}}

    def _auto_clean(self) -> None:
        now = self.clock()
        for key in list(self.table):
            topic, _, group = key.partition("@")
            queues = self.table[key]
            for queue_id in list(queues):
                if (not self.exists(topic, group, queue_id)
                        or now - queues[queue_id].last_consume_timestamp > CLEAN_SPAN_FROM_LAST_MS):
                    del queues[queue_id]
            if not queues:
                del self.table[key]

    # ------------------------------------------------------------------ FIFO pops

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(_key(topic, group), {}).get(queue_id)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int,
                    invisible_time: int) -> bool:
        """Whether another popper still holds the queue (5.3 `checkBlock`)."""
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time, self.clock())

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int,
               pop_time: int, invisible_time: int, offsets: list[int]) -> list[str]:
        """Record a FIFO pop; returns its orderCountInfo entries (per message, then the
        queue's smallest count, which older clients read)."""
        info = OrderInfo(pop_time, invisible_time, build_offset_list(offsets), self.clock(),
                         attempt_id=attempt_id)
        queues = self.table.setdefault(_key(topic, group), {})
        previous = queues.get(queue_id)
        if previous is not None:
            info.merge_consumed_count(previous)
        queues[queue_id] = info
        counts = info.offset_consumed_count
        entries = [receipt.order_count_offset_entry(topic, queue_id, o, n)
                   for o, n in counts.items()]
        least = min(counts.values()) if counts and len(counts) == len(info.offset_list) else 0
        entries.append(receipt.order_count_entry(topic, queue_id, least))
        return entries

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int,
                        pop_time: int) -> int:
        """Mark an offset acked; returns the consumer offset to commit, ILLEGAL or NO_NEED."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offset_list:
            return ILLEGAL
        if pop_time != info.pop_time:
            log.warning("FIFO ack of %s@%s queue %d offset %d: pop time %d is not the last "
                        "pop's %d", topic, group, queue_id, queue_offset, pop_time, info.pop_time)
            return NO_NEED
        offsets = info.queue_offsets()
        if queue_offset not in offsets:
            return ILLEGAL
        info.commit_offset_bit |= 1 << offsets.index(queue_offset)
        info.last_consume_timestamp = self.clock()
        return info.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int,
                                 queue_offset: int, pop_time: int, next_visible: int) -> None:
        info = self.get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time:
            return
        info.offset_next_visible_time[queue_offset] = next_visible
        info.last_consume_timestamp = self.clock()

    def unblocked_at(self, topic: str, group: str) -> int | None:
        """When the first queue of the topic still held by a FIFO popper becomes free (the
        invisible time of an unacked message runs out), if one is held (5.3 wakes held
        pops then: `ConsumerOrderInfoLockManager`)."""
        now = self.clock()
        times = [t for info in self.table.get(_key(topic, group), {}).values()
                 if (t := info.held_until(now)) is not None]
        return min(times) if times else None

    def inflight(self, topic: str, group: str, queue_id: int) -> int:
        info = self.get(topic, group, queue_id)
        return 0 if info is None else info.inflight(self.clock())

    def remove(self, topic: str | None = None, group: str | None = None) -> None:
        """Forget a deleted topic's or group's order info."""
        for key in list(self.table):
            t, _, g = key.partition("@")
            if (topic is not None and t == topic) or (group is not None and g == group):
                del self.table[key]
