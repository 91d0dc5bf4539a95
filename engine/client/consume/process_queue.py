"""`ProcessQueue`: one queue's pulled-but-unconsumed messages, and its lock and pull state.

How this works: messages are kept by queue offset in a dict plus a min-heap of offsets (with
lazy deletion), so the smallest unconsumed offset - the offset a consumer may commit - is
cheap to find however consumption completes.  Concurrent consumption `remove`s what a
listener finished and commits the smallest offset still cached (or the highest seen + 1
when nothing is left), never moving backwards.  Orderly consumption `take`s the smallest
messages into a separate "consuming" table and either `commit`s them (offset = last taken
+ 1) or puts them back to be consumed again (`make_consume_again`, `rollback`).
"""

from __future__ import annotations

import asyncio
import heapq
import time

from engine.client.core.message import MessageExt
from engine.protocol.body.admin import ProcessQueueInfo

LOCK_MAX_LIVE_MS = 30_000  # rocketmq.client.rebalance.lockMaxLiveTime
PULL_MAX_IDLE_MS = 120_000  # rocketmq.client.pull.pullMaxIdleTime


def now_ms() -> int:
    return int(time.time() * 1000)


class ProcessQueue:
    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self._heap: list[int] = []
        self.msg_size = 0
        self.queue_offset_max = -1
        self.consuming: dict[int, MessageExt] = {}
        self.dropped = False
        self.locked = False
        self.last_lock_ms = 0
        self.last_pull_ms = now_ms()
        self.last_consume_ms = now_ms()
        self.try_unlock_times = 0
        self.orderly_busy = False  # an orderly consume request is queued or running
        self.consume_lock = asyncio.Lock()

    @property
    def msg_count(self) -> int:
        return len(self.msgs) + len(self.consuming)

    def _min_cached(self) -> int | None:
        heap = self._heap
        while heap and heap[0] not in self.msgs:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def put(self, msgs: list[MessageExt]) -> bool:
        """Cache pulled messages; True when an orderly consumer should be started for them."""
        for m in msgs:
            offset = m.queue_offset
            if offset not in self.msgs and offset not in self.consuming:
                self.msgs[offset] = m
                heapq.heappush(self._heap, offset)
                self.msg_size += len(m.body)
            if offset > self.queue_offset_max:
                self.queue_offset_max = offset
        dispatch = bool(self.msgs) and not self.orderly_busy
        if dispatch:
            self.orderly_busy = True
        return dispatch

    def max_span(self) -> int:
        """Offset distance between the first and last cached message."""
        first = self._min_cached()
        return 0 if first is None else self.queue_offset_max - first

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit, or -1 if nothing was cached."""
        if not self.msgs:
            return -1
        self.last_consume_ms = now_ms()
        for m in msgs:
            kept = self.msgs.pop(m.queue_offset, None)
            if kept is not None:
                self.msg_size -= len(kept.body)
        first = self._min_cached()
        return self.queue_offset_max + 1 if first is None else first

    def take(self, n: int) -> list[MessageExt]:
        """Orderly: move the `n` smallest cached messages to the consuming table."""
        self.last_consume_ms = now_ms()
        out: list[MessageExt] = []
        heap = self._heap
        while heap and len(out) < n:
            offset = heapq.heappop(heap)
            m = self.msgs.pop(offset, None)
            if m is not None:
                self.consuming[offset] = m
                out.append(m)
        if not out:
            self.orderly_busy = False
        return out

    def commit(self) -> int:
        """Orderly: the taken messages are done; returns the offset after the last of them."""
        if not self.consuming:
            return -1
        last = max(self.consuming)
        self.msg_size -= sum(len(m.body) for m in self.consuming.values())
        self.consuming.clear()
        return last + 1

    def make_consume_again(self, msgs: list[MessageExt]) -> None:
        """Orderly: put taken messages (maybe with new reconsume counts) back in the cache."""
        for m in msgs:
            self.consuming.pop(m.queue_offset, None)
            self.msgs[m.queue_offset] = m
            heapq.heappush(self._heap, m.queue_offset)

    def rollback(self) -> None:
        self.make_consume_again(list(self.consuming.values()))

    def clear(self) -> None:
        self.msgs.clear()
        self._heap.clear()
        self.consuming.clear()
        self.msg_size = 0
        self.queue_offset_max = -1

    def lock_expired(self, now: int | None = None) -> bool:
        return (now or now_ms()) - self.last_lock_ms > LOCK_MAX_LIVE_MS

    def pull_expired(self, now: int | None = None) -> bool:
        return (now or now_ms()) - self.last_pull_ms > PULL_MAX_IDLE_MS

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        first = self._min_cached()
        return ProcessQueueInfo(
            commit_offset=commit_offset, cached_msg_min_offset=first or 0,
            cached_msg_max_offset=max(self.queue_offset_max, 0), cached_msg_count=self.msg_count,
            cached_msg_size_in_mib=self.msg_size // (1024 * 1024), locked=self.locked,
            try_unlock_times=self.try_unlock_times, last_lock_timestamp=self.last_lock_ms,
            droped=self.dropped, last_pull_timestamp=self.last_pull_ms,
            last_consume_timestamp=self.last_consume_ms)
