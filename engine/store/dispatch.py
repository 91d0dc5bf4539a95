"""Dispatch ("reput"): commit-log records -> consume-queue and index entries, plus arrival waiters.

How this works: a local put hands its `DispatchRequest`s straight to the dispatcher (same
thread, right after the append), so no record is decoded twice; a batch put hands them as
`BatchRequests` columns, which become one consume-queue write and one index pass.  Records
that reach the commit log any other way (recovery, raw HA appends) are found by `reput()`,
which scans the commit log from `reput_from_offset` with `scan_record` and dispatches what
it finds.  Either way `reput_from_offset` advances, and waiters whose queue grew past their
offset are woken: asyncio futures (long polling) and plain callbacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from engine.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from engine.store.commit_log import BatchRequests, CommitLog
from engine.store.consume_queue import ConsumeQueue
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.index_service import IndexService
from engine.store.record_scan import scan_record
from engine.store.results import DispatchRequest

_DISPATCHED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)  # to consume queues

ArrivalListener = Callable[[str, int, int], None]
"""Called with (topic, queue_id, new max offset) after entries were dispatched."""


class ArrivalWaiters:
    """Futures waiting for a queue's max offset to pass a value (long polling)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[int]]]] = {}
        self.listeners: list[ArrivalListener] = []

    def __bool__(self) -> bool:
        return bool(self._waiters) or bool(self.listeners)

    def wait(self, topic: str, queue_id: int, offset: int, max_offset: int) -> asyncio.Future[int]:
        """A future resolved with the queue's max offset once it is > `offset`."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if max_offset > offset:
            fut.set_result(max_offset)
            return fut
        lst = self._waiters.setdefault((topic, queue_id), [])
        if len(lst) >= 64:
            lst[:] = [w for w in lst if not w[1].done()]
        lst.append((offset, fut))
        return fut

    def notify(self, topic: str, queue_id: int, max_offset: int) -> None:
        key = (topic, queue_id)
        lst = self._waiters.get(key)
        if lst:
            keep = []
            for offset, fut in lst:
                if fut.done():
                    continue
                if max_offset > offset:
                    fut.set_result(max_offset)
                else:
                    keep.append((offset, fut))
            if keep:
                self._waiters[key] = keep
            else:
                del self._waiters[key]
        for cb in self.listeners:
            cb(topic, queue_id, max_offset)

    def cancel_all(self) -> None:
        for lst in self._waiters.values():
            for _, fut in lst:
                if not fut.done():
                    fut.cancel()
        self._waiters.clear()


class Dispatcher:
    """Builds consume-queue and index entries; tracks `reput_from_offset`."""

    def __init__(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService,
        *,
        check_crc: bool = False,
    ) -> None:
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.waiters = ArrivalWaiters()
        self.reput_from_offset = 0
        self.check_crc = check_crc
        self.last_dispatched_timestamp = 0

    def dispatch_one(self, req: DispatchRequest) -> None:
        """`dispatch([req])` without the loop: the single-put hot path."""
        topic, queue_id, offset, size, tags_code, timestamp, qo, keys, uniq, sysflag, _ = req
        if (sysflag & TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES:
            cq = self.queues.flat.get((topic, queue_id))
            if cq is None:
                cq = self.queues.find_or_create(topic, queue_id)
            cq.put_entry(offset, size, tags_code, timestamp, qo)
            waiters = self.waiters
            if waiters._waiters or waiters.listeners:  # bool(waiters) without the call
                waiters.notify(topic, queue_id, cq.max_offset)
        if keys or uniq:
            self.index.build_index(req)
        end = offset + size
        if end > self.reput_from_offset:
            self.reput_from_offset = end
        self.last_dispatched_timestamp = timestamp

    def dispatch_many(self, reqs: Sequence[DispatchRequest]) -> None:
        """`dispatch_one` for the records of puts made together (rising offsets, any
        queues), waiters notified once per queue."""
        flat = self.queues.flat
        grown: dict[tuple[str, int], ConsumeQueue] = {}
        indexed = False
        for req in reqs:
            topic, queue_id, offset, size, tags_code, timestamp, qo, keys, uniq, sysflag, _ = req
            if (sysflag & TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES:
                key = (topic, queue_id)
                cq = flat.get(key)
                if cq is None:
                    cq = self.queues.find_or_create(topic, queue_id)
                cq.put_entry(offset, size, tags_code, timestamp, qo)
                grown[key] = cq
            indexed = indexed or bool(keys or uniq)
        if indexed:
            self.index.build_many(reqs)
        last = reqs[-1]
        end = last.commit_log_offset + last.msg_size
        if end > self.reput_from_offset:
            self.reput_from_offset = end
        self.last_dispatched_timestamp = last.store_timestamp
        waiters = self.waiters
        if waiters._waiters or waiters.listeners:  # bool(waiters) without the call
            for (topic, queue_id), cq in grown.items():
                waiters.notify(topic, queue_id, cq.max_offset)

    def dispatch_batch(self, reqs: Sequence[DispatchRequest]) -> None:
        """Dispatch the records of one batch put (same topic, queue and sysflag)."""
        if not isinstance(reqs, BatchRequests):
            self.dispatch(reqs)
            return
        topic, queue_id, offsets = reqs.topic, reqs.queue_id, reqs.offsets
        if (reqs.sysflag & TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES:
            cq = self.queues.flat.get((topic, queue_id))
            if cq is None:
                cq = self.queues.find_or_create(topic, queue_id)
            cq.put_entries(
                reqs.first_queue_offset, offsets, reqs.sizes, reqs.tags_codes, reqs.store_timestamp
            )
            waiters = self.waiters
            if waiters._waiters or waiters.listeners:  # bool(waiters) without the call
                waiters.notify(topic, queue_id, cq.max_offset)
        self.index.build_batch(
            topic, reqs.sysflag, offsets, reqs.keys, reqs.uniq_keys, reqs.store_timestamp
        )
        end = offsets[-1] + reqs.sizes[-1]
        if end > self.reput_from_offset:
            self.reput_from_offset = end
        self.last_dispatched_timestamp = reqs.store_timestamp

    def dispatch(self, reqs: Sequence[DispatchRequest]) -> None:
        """Dispatch records in commit-log order (they must start at `reput_from_offset`)."""
        queues = self.queues
        index = self.index
        grown: dict[tuple[str, int], int] | None = {} if self.waiters else None
        for req in reqs:
            tran = req.sysflag & TRANSACTION_TYPE_MASK
            if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                cq = queues.find_or_create(req.topic, req.queue_id)
                cq.put(req)
                if grown is not None:
                    grown[(req.topic, req.queue_id)] = cq.max_offset
            index.build_index(req)
            end = req.commit_log_offset + req.msg_size
            if end > self.reput_from_offset:
                self.reput_from_offset = end
            self.last_dispatched_timestamp = req.store_timestamp
        if grown:
            for (topic, qid), max_offset in grown.items():
                self.waiters.notify(topic, qid, max_offset)

    def reput(self, until: int | None = None) -> int:
        """Scan the commit log from `reput_from_offset` and dispatch every valid record.

        Returns:
            The number of records dispatched.
        """
        end = self.commit_log.max_offset if until is None else until
        mfq = self.commit_log.mfq
        count = 0
        if self.reput_from_offset < mfq.min_offset():
            self.reput_from_offset = mfq.min_offset()
        delay = self.commit_log.delay_table
        while self.reput_from_offset < end:
            offset = self.reput_from_offset
            mf = mfq.find(offset)
            if mf is None:
                break
            pos = offset - mf.file_from_offset
            limit = min(mf.wrote_position, end - mf.file_from_offset)
            batch: list[DispatchRequest] = []
            while pos < limit:
                r = scan_record(
                    mf.mm, pos, limit, mf.file_from_offset,
                    check_crc=self.check_crc, delay_table=delay,
                )  # fmt: skip
                if r.request is not None:
                    batch.append(r.request)
                    pos += r.size
                    if len(batch) >= 4096:  # bounded memory over a long scan
                        self.dispatch(batch)
                        count += len(batch)
                        batch = []
                    continue
                if r.blank:
                    pos = mf.file_size
                break
            if batch:
                self.dispatch(batch)
                count += len(batch)
            if pos >= mf.file_size:
                self.reput_from_offset = mf.file_end_offset
            elif pos >= limit:
                self.reput_from_offset = mf.file_from_offset + pos
                break
            else:
                break  # an invalid record: stop (recovery truncates it)
        return count
