"""All consume queues of a store, by topic and queue id: load, recover, flush, trim."""

from __future__ import annotations

import os
from collections.abc import Iterator

from engine.store.consume_queue import ConsumeQueue


class ConsumeQueueTable:
    """`<root>/consumequeue/<topic>/<queueId>/` for every queue that has entries."""

    def __init__(self, root: str, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.table: dict[str, dict[int, ConsumeQueue]] = {}
        self.flat: dict[tuple[str, int], ConsumeQueue] = {}  # same queues, one lookup

    def __iter__(self) -> Iterator[ConsumeQueue]:
        for queues in list(self.table.values()):
            yield from list(queues.values())

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self.table.get(topic)
        return queues.get(queue_id) if queues else None

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self.table.get(topic)
        if queues is None:
            queues = self.table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            cq = queues[queue_id] = ConsumeQueue(topic, queue_id, self.root, self.file_size)
            self.flat[(topic, queue_id)] = cq
        return cq

    def load(self) -> None:
        if not os.path.isdir(self.root):
            return
        for topic in sorted(os.listdir(self.root)):
            tdir = os.path.join(self.root, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir)):
                if qname.isdigit() and os.path.isdir(os.path.join(tdir, qname)):
                    self.find_or_create(topic, int(qname)).load()

    def recover(self) -> int:
        """Recover every queue; returns the max physical end offset they reference."""
        max_phys = -1
        for cq in self:
            cq.recover()
            max_phys = max(max_phys, cq.max_physic_offset)
        return max_phys

    def recover_to(self, phy_offset: int) -> None:
        """Cut every queue after the entries of records ending by `phy_offset`."""
        for cq in self:
            cq.recover_to(phy_offset)

    def truncate_dirty(self, phy_offset: int) -> None:
        for cq in self:
            if cq.max_physic_offset > phy_offset:
                cq.truncate_dirty(phy_offset)

    def correct_min_offsets(self, phy_min: int) -> None:
        for cq in self:
            cq.correct_min_offset(phy_min)

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """The commit log's next-logical-offset table: each queue's max offset."""
        return {(cq.topic, cq.queue_id): cq.max_offset for cq in self if cq.max_offset > 0}

    def flush(self, least_pages: int = 0) -> None:
        for cq in self:
            cq.flush(least_pages)

    def remove(self, cq: ConsumeQueue) -> None:
        queues = self.table.get(cq.topic)
        if queues is not None and queues.get(cq.queue_id) is cq:
            del queues[cq.queue_id]
            self.flat.pop((cq.topic, cq.queue_id), None)
            if not queues:
                del self.table[cq.topic]
        cq.destroy()

    def destroy(self) -> None:
        for cq in list(self):
            self.remove(cq)

    def close(self) -> None:
        for cq in self:
            cq.mfq.close()
