"""`CheckpointBook`: the checkpoints not yet done, their acks, and the in-flight counts.

How this works: every checkpoint the broker writes to (or, after a restart, reads back from)
the revive topic is entered here with the revive-queue offset it was stored at; every ack
clears bits of it.  A checkpoint leaves the book when all its messages are acked or when the
revive service has put the unacked ones back.  Because checkpoints enter each revive queue's
table in offset order, the revive queue's progress (what its consumer offset may say) is just
before the oldest checkpoint still in the book, or the queue's end when none is.  The in-flight
figure of a queue (popped, not acked, not yet revived) is counted from the same entries.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from engine.broker.pop.records import CkKey, PopCheckPoint


@dataclass(slots=True)
class Pending:
    """A checkpoint in the book."""

    ck: PopCheckPoint
    revive_qid: int
    revive_offset: int
    #: Bits of the messages acked (or already put back by a partial revive).
    done: int
    #: When the revive service looks at it next: its revive time, later after a failed put.
    due: int

    @property
    def open_count(self) -> int:
        return sum(1 for i in range(self.ck.num) if not self.done >> i & 1)

    @property
    def complete(self) -> bool:
        return self.done == (1 << self.ck.num) - 1


class CheckpointBook:
    def __init__(self) -> None:
        self._by_key: dict[CkKey, Pending] = {}
        #: revive qid -> checkpoints in revive-offset order
        self._by_qid: dict[int, dict[CkKey, Pending]] = {}
        self._heap: list[tuple[int, int, CkKey]] = []
        self._seq = 0
        #: (topic, group) -> queue id -> messages in flight
        self._inflight: dict[tuple[str, str], dict[int, int]] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def clear(self) -> None:
        self._by_key.clear()
        self._by_qid.clear()
        self._heap.clear()
        self._inflight.clear()

    # ------------------------------------------------------------------ changes

    def add(self, ck: PopCheckPoint, revive_qid: int, revive_offset: int) -> Pending:
        """Enter a checkpoint stored at `revive_offset` of revive queue `revive_qid`."""
        key = ck.key
        old = self._by_key.get(key)
        if old is not None:  # the same key twice (same millisecond): the newer one counts
            self._drop(old)
        entry = Pending(ck, revive_qid, revive_offset, ck.bit_map, ck.revive_time)
        self._by_key[key] = entry
        self._by_qid.setdefault(revive_qid, {})[key] = entry
        self._push(entry)
        self._count(ck, entry.open_count)
        return entry

    def ack(self, key: CkKey, offsets: tuple[int, ...] | list[int]) -> int:
        """Mark messages of a checkpoint acked; returns how many were open.  A checkpoint
        unknown here (revived already, or never written) takes no ack."""
        entry = self._by_key.get(key)
        if entry is None:
            return 0
        cleared = 0
        for offset in offsets:
            index = entry.ck.index_of_ack(offset)
            if index >= 0 and not entry.done >> index & 1:
                entry.done |= 1 << index
                cleared += 1
        if cleared:
            self._count(entry.ck, -cleared)
            if entry.complete:
                self._remove(entry)
        return cleared

    def finish(self, entry: Pending) -> None:
        """The revive service put every open message back: the checkpoint is done."""
        if self._by_key.get(entry.ck.key) is entry:
            self._count(entry.ck, -entry.open_count)
            self._remove(entry)

    def postpone(self, entry: Pending, until: int) -> None:
        entry.due = until
        self._push(entry)

    def mark_done(self, entry: Pending, index: int) -> None:
        """One message of a checkpoint was put back (the others are still to go)."""
        if not entry.done >> index & 1:
            entry.done |= 1 << index
            self._count(entry.ck, -1)

    # ------------------------------------------------------------------ reads

    def get(self, key: CkKey) -> Pending | None:
        return self._by_key.get(key)

    def due(self, now: int) -> Iterator[Pending]:
        """Checkpoints whose time has come, earliest first (each once per `postpone`)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, key = heapq.heappop(heap)
            entry = self._by_key.get(key)
            if entry is not None and entry.due == due:
                yield entry

    def next_due(self) -> int | None:
        """When the earliest checkpoint falls due (stale heap entries may make it earlier)."""
        return self._heap[0][0] if self._heap else None

    def oldest_offset(self, revive_qid: int) -> int | None:
        """The revive offset of the oldest checkpoint of a revive queue still in the book."""
        table = self._by_qid.get(revive_qid)
        if not table:
            return None
        return next(iter(table.values())).revive_offset

    def inflight(self, topic: str, group: str, queue_id: int) -> int:
        return self._inflight.get((topic, group), {}).get(queue_id, 0)

    # ------------------------------------------------------------------ internals

    def _push(self, entry: Pending) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (entry.due, self._seq, entry.ck.key))

    def _count(self, ck: PopCheckPoint, delta: int) -> None:
        if not delta:
            return
        queues = self._inflight.setdefault((ck.topic, ck.cid), {})
        left = queues.get(ck.queue_id, 0) + delta
        if left > 0:
            queues[ck.queue_id] = left
        else:
            queues.pop(ck.queue_id, None)
            if not queues:
                del self._inflight[(ck.topic, ck.cid)]

    def _drop(self, entry: Pending) -> None:
        self._count(entry.ck, -entry.open_count)
        self._remove(entry)

    def _remove(self, entry: Pending) -> None:
        key = entry.ck.key
        del self._by_key[key]
        table = self._by_qid.get(entry.revive_qid)
        if table is not None:
            table.pop(key, None)
            if not table:
                del self._by_qid[entry.revive_qid]
