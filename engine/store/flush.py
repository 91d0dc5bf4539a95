"""Flush services: periodic commit-log flush (ASYNC_FLUSH), group commit (SYNC_FLUSH), CQ flush.

How this works: the event loop only ever writes into the mmaps; `os.fdatasync` runs in a
worker thread (`asyncio.to_thread`).  Under SYNC_FLUSH every put registers the end offset
of its bytes with `GroupCommitService` and awaits a future; the service flushes whatever
has been written by then (one fdatasync per segment touched) and resolves every request
that the flush covered, so concurrent puts share fsyncs.  A request not covered within
syncFlushTimeout reports FLUSH_DISK_TIMEOUT to its put.
"""

from __future__ import annotations

import asyncio
import time

from engine.common.service import Service
from engine.store.checkpoint import StoreCheckpoint
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.dispatch import Dispatcher
from engine.store.index_service import IndexService
from engine.store.mapped_file_queue import MappedFileQueue


class FlushCommitLogService(Service):
    """ASYNC_FLUSH: flush every flushIntervalCommitLog when >= least pages are dirty."""

    name = "flush-commitlog"

    def __init__(
        self,
        mfq: MappedFileQueue,
        checkpoint: StoreCheckpoint,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self.mfq = mfq
        self.checkpoint = checkpoint
        self.least_pages = least_pages
        self.thorough_interval = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()

    async def run_once(self) -> None:
        pages = self.least_pages
        now = time.monotonic()
        if now - self._last_thorough >= self.thorough_interval:
            self._last_thorough = now
            pages = 0
        await asyncio.to_thread(self.mfq.flush, pages)
        if self.mfq.store_timestamp:
            self.checkpoint.physic_msg_timestamp = self.mfq.store_timestamp

    async def on_stop(self) -> None:
        await asyncio.to_thread(self.mfq.flush, 0)
        if self.mfq.store_timestamp:
            self.checkpoint.physic_msg_timestamp = self.mfq.store_timestamp


class GroupCommitService(Service):
    """SYNC_FLUSH: puts await `wait_flushed(end)`; one flush serves every waiting put.

    Timeouts cost no timer per put: requests carry a deadline and one watchdog timer
    expires overdue ones (even while a flush is stuck in the worker thread).
    """

    name = "group-commit"

    def __init__(self, mfq: MappedFileQueue, checkpoint: StoreCheckpoint, timeout_ms: int) -> None:
        super().__init__(1.0)
        self.mfq = mfq
        self.checkpoint = checkpoint
        self.timeout = timeout_ms / 1000
        self._requests: list[tuple[int, asyncio.Future[bool], float]] = []
        self._inflight: list[tuple[int, asyncio.Future[bool], float]] = []
        self._watchdog: asyncio.TimerHandle | None = None
        self.flush_count = 0

    async def wait_flushed(self, end_offset: int) -> bool:
        """True once every byte before `end_offset` is on disk; False after the timeout."""
        if self.mfq.flushed_where >= end_offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._requests.append((end_offset, fut, loop.time() + self.timeout))
        self.wakeup()
        if self._watchdog is None:
            self._watchdog = loop.call_later(self.timeout, self._expire)
        return await fut

    def _expire(self) -> None:
        self._watchdog = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        earliest = None
        for lst in (self._inflight, self._requests):
            for _end, fut, deadline in lst:
                if fut.done():
                    continue
                if deadline <= now:
                    fut.set_result(False)
                elif earliest is None or deadline < earliest:
                    earliest = deadline
        if earliest is not None:
            self._watchdog = loop.call_at(earliest, self._expire)

    async def run_once(self) -> None:
        while self._requests:
            reqs, self._requests = self._requests, []
            self._inflight = reqs
            await asyncio.to_thread(self.mfq.flush, 0)
            self._inflight = []
            self.flush_count += 1
            if self.mfq.store_timestamp:
                self.checkpoint.physic_msg_timestamp = self.mfq.store_timestamp
            flushed = self.mfq.flushed_where
            for req in reqs:
                fut = req[1]
                if fut.done():
                    continue
                if req[0] <= flushed:
                    fut.set_result(True)
                else:
                    self._requests.append(req)

    async def on_stop(self) -> None:
        await asyncio.to_thread(self.mfq.flush, 0)
        flushed = self.mfq.flushed_where
        reqs, self._requests = self._requests, []
        for end, fut, _ in reqs:
            if not fut.done():
                fut.set_result(end <= flushed)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None


class FlushConsumeQueueService(Service):
    """Flush consume queues and the index every flushIntervalConsumeQueue, then the checkpoint.

    Each round also moves the checkpoint's recovery offset (checkpoint.py) to the newest
    record boundary below which everything is on disk: records (commit-log flushed
    position), their consume-queue entries (no queue holds an unflushed entry of an
    earlier record) and their index entries.  Boundaries found while the commit-log flush
    lags behind wait in `_candidates` until it catches up.
    """

    name = "flush-consumequeue"

    def __init__(
        self,
        queues: ConsumeQueueTable,
        index: IndexService,
        dispatcher: Dispatcher,
        checkpoint: StoreCheckpoint,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        commit_log: MappedFileQueue | None = None,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self.queues = queues
        self.index = index
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint
        self.commit_log = commit_log
        self.least_pages = least_pages
        self.thorough_interval = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()
        self._candidates: list[int] = []
        self._epoch = -1

    def _flush(self, pages: int, logics_ts: int, dispatched: int, epoch: int) -> None:
        bound = dispatched
        for cq in list(self.queues):
            if not cq.flush(pages):
                bound = min(bound, cq.first_unflushed_phys())
        index_ts = self.index.flush()
        if logics_ts and pages == 0:  # only a thorough flush covers every dispatched entry
            self.checkpoint.logics_msg_timestamp = logics_ts
        if index_ts:
            self.checkpoint.index_msg_timestamp = index_ts
        if self.commit_log is not None:
            self._advance(bound, epoch)
        self.checkpoint.flush()

    def _advance(self, bound: int, epoch: int) -> None:
        assert self.commit_log is not None
        if epoch != self._epoch:  # a truncation since: older boundaries are void
            self._epoch, self._candidates = epoch, []
        cands = self._candidates
        if not cands or bound > cands[-1]:
            cands.append(bound)
        flushed = self.commit_log.flushed_where
        best = -1
        for c in cands:
            if c <= flushed:
                best = c
        if best >= 0:
            self.checkpoint.advance(best, epoch)
            self._candidates = [c for c in cands if c > best]
        elif len(cands) > 1000:  # the commit-log flush is stuck: keep the oldest ones
            del cands[500:]

    async def run_once(self) -> None:
        pages = self.least_pages
        now = time.monotonic()
        if now - self._last_thorough >= self.thorough_interval:
            self._last_thorough = now
            pages = 0
        await self._round(pages)

    async def _round(self, pages: int) -> None:
        self.index.write_header()
        d = self.dispatcher
        epoch = self.checkpoint.epoch
        await asyncio.to_thread(
            self._flush, pages, d.last_dispatched_timestamp, d.reput_from_offset, epoch
        )

    async def on_stop(self) -> None:
        await self._round(0)
