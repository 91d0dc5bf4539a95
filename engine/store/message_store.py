"""MessageStore: the facade over commit log, consume queues, index, flush, recovery and cleanup.

Threading contract:
    * A store is owned by one thread, normally the thread running the asyncio event loop.
      Every public method is called from that thread.  Puts are memory copies into mmaps
      and return without blocking; reads copy into `bytes`.
    * `load()` (files + recovery) is synchronous; call it before `start()`.  It may block
      for a while on a large store, so a server runs it before serving (or in a thread,
      before any other method is used).
    * `start()` / `shutdown()` are coroutines: they start and stop the background
      services (each one asyncio task), which run blocking syscalls (fdatasync, segment
      pre-allocation) in worker threads.  The worker threads never change the store's
      tables; they only flush bytes already written.
    * `put_message()` / `put_messages()` are coroutines: they append synchronously and,
      under SYNC_FLUSH, await the group commit (before `start()`, they fdatasync in place);
      `append_message()` / `append_messages()` are their synchronous halves (no flush
      wait), for tools and tests.
    * `close()` is a synchronous shutdown for stores used without an event loop (tools);
      with services started, use `await shutdown()`.
    * Long polling: `wait_for_arrival()` returns an `asyncio.Future` of the running loop,
      resolved from the put that makes the queue grow; `add_arrival_listener()` registers
      a plain callback called the same way.
    * Replication: `on_append` (None by default), while set, is called as
      `on_append(end_offset, count)` after a local put, so an HA master can wake its
      senders; `append_raw()` takes the bytes a slave receives; `read_commit_log()` gives a
      sender what to send; `writes_refused` (a reason, None by default) makes every put
      fail while a role switch or fencing is under way; `in_sync_replicas_short` (a reason)
      makes them fail with IN_SYNC_REPLICAS_NOT_ENOUGH (a controller-mode master below
      minInSyncReplicas); `truncate_to()` drops a diverged tail.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from engine.common.service import Service
from engine.protocol.message import Address, BatchMessage, BrokerMessage
from engine.store.checkpoint import (
    StoreCheckpoint,
    create_abort_file,
    delete_abort_file,
    lock_store_dir,
)
from engine.store.cleanup import CleanupReport, CleanupService, DiskUsageProbe, default_disk_usage
from engine.store.commit_log import AppendResult, CommitLog
from engine.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from engine.store.config_files import ConfigFiles
from engine.store.consume_queue import ConsumeQueue
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.delay_levels import schedule
from engine.store.dispatch import ArrivalListener, Dispatcher
from engine.store.errors import StoreClosedError
from engine.store.flush import FlushCommitLogService, FlushConsumeQueueService, GroupCommitService
from engine.store.index_service import IndexService
from engine.store.mapped_file_queue import Preallocator
from engine.store.message_filter import MessageFilter
from engine.store.read_path import MessageReader
from engine.store.record_scan import TIMER_TOPIC
from engine.store.recovery import RecoveryReport, recover
from engine.store.results import (
    GetMessageResult,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)
from engine.store.timer.timer_store import TimerMessageStore
from engine.store.timer.transform import TIMER_MARK, to_timer

log = logging.getLogger(__name__)

PUT_OK = PutMessageStatus.PUT_OK
_new = tuple.__new__  # builds the NamedTuples of the hot path without their Python __new__


_TIMER_REFUSALS = {
    PutMessageStatus.WHEEL_TIMER_NOT_ENABLE:
        "accurate timer message is not enabled, timerWheelEnable is {enabled}",
    PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
        "timer message illegal, the delay time should not be bigger than the max delay "
        "{max_ms}ms; or if set del msg, the delay time should be bigger than the current time",
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


_Item = TypeVar("_Item", BrokerMessage, BatchMessage)


def _flushed(
    append: Callable[[MessageStore, _Item], PutMessageResult], what: str
) -> Callable[[MessageStore, _Item], Coroutine[Any, Any, PutMessageResult]]:
    """The put coroutine method over the synchronous `append` method: it appends and, under
    SYNC_FLUSH, returns once the appended bytes are on disk (flushing in place before
    `start()`).  `put_message` and `put_messages` are both made here rather than awaiting a
    shared coroutine, so that a put stays one coroutine frame on the hot path."""

    async def put(self: MessageStore, item: _Item) -> PutMessageResult:
        result = append(self, item)
        gc = self._group_commit_for(result)
        return result if gc is None else await self._await_flush(result, gc)

    put.__doc__ = f"{what}; under SYNC_FLUSH return once its bytes are on disk."
    return put


class MessageStore:
    """A RocketMQ-layout message store under `config.store_path_root_dir`."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: Address = ("127.0.0.1", 10911),
        clock: Callable[[], int] | None = None,
        disk_usage: DiskUsageProbe | None = None,
        total_physical_memory: int | None = None,
    ) -> None:
        self.config = config
        self.store_host = store_host
        self.clock = clock or _now_ms
        self.total_physical_memory = total_physical_memory or _total_physical_memory()
        self._prealloc = Preallocator()
        delay_table = config.delay_level_table()
        self._max_delay_level = max(delay_table)
        self.commit_log = CommitLog(
            config.commit_log_dir,
            config.mapped_file_size_commit_log,
            store_host=store_host,
            max_message_size=config.max_message_size,
            clock=self.clock,
            delay_table=delay_table,
            preallocator=self._prealloc,
            warm=config.warm_mapped_file_enable,
        )
        self.queues = ConsumeQueueTable(
            config.consume_queue_dir, config.mapped_file_size_consume_queue
        )
        self.index = IndexService(
            config.index_dir, config.max_hash_slot_num, config.max_index_num, self.clock,
            enabled=config.message_index_enable,
        )  # fmt: skip
        self.dispatcher = Dispatcher(self.commit_log, self.queues, self.index)
        self.reader = MessageReader(
            config, self.commit_log, self.queues, self.total_physical_memory
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.cleanup = CleanupService(
            config, self.commit_log, self.queues, self.index, self.clock,
            disk_usage or default_disk_usage,
        )  # fmt: skip
        self.group_commit: GroupCommitService | None = None
        self.config_files = ConfigFiles(config.config_dir)
        self._services: list[Service] = []
        self._loaded = False
        self._lock_fd = -1
        self._running = False
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.last_exit_ok = True
        self.recovery_report: RecoveryReport | None = None
        #: Called as on_append(end_offset, record_count) after each local put (HA master).
        self.on_append: Callable[[int, int], None] | None = None
        #: While set, every put fails with SERVICE_NOT_AVAILABLE and this reason (fencing).
        self.writes_refused: str | None = None
        #: While set, every put fails with IN_SYNC_REPLICAS_NOT_ENOUGH and this reason.
        self.in_sync_replicas_short: str | None = None
        #: Timer messages (5.x): timer log, wheel and checkpoint beside the commit log.
        self.timer = TimerMessageStore(config, self.clock, self)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool:
        """Open every file and recover; returns whether the previous shutdown was clean.

        Raises:
            StoreLoadError: segment files that do not match the configured sizes, or a
                store directory locked by another process.
        """
        cfg = self.config
        os.makedirs(cfg.store_path_root_dir, exist_ok=True)
        self._lock_fd = lock_store_dir(cfg.lock_path)
        self.last_exit_ok = not os.path.exists(cfg.abort_path)
        self.commit_log.mfq.load()
        self.queues.load()
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        # with a recovery offset, recovery trims the index by offset instead of by time
        by_offset = self.checkpoint.recovery_offset is not None
        self.index.load(self.last_exit_ok or by_offset, self.checkpoint.index_msg_timestamp)
        started, cpu = time.perf_counter(), time.process_time()
        self.recovery_report = recover(
            self.commit_log, self.queues, self.index, self.dispatcher, self.checkpoint,
            last_exit_ok=self.last_exit_ok, check_crc=cfg.check_crc_on_recover,
            index_safe=cfg.message_index_safe,
        )  # fmt: skip
        took = f"{time.perf_counter() - started:.3f} s ({time.process_time() - cpu:.3f} s CPU)"
        if not self.last_exit_ok:
            log.warning("store %s was not shut down cleanly, recovered in %s: %s",
                        cfg.store_path_root_dir, took, self.recovery_report)  # fmt: skip
        else:
            log.info("store %s recovered in %s: %s", cfg.store_path_root_dir, took,
                     self.recovery_report)  # fmt: skip
        self.timer.load()
        self._loaded = True
        self._running = True
        return self.last_exit_ok

    async def start(self) -> None:
        """Create the abort marker and start flush and cleanup services."""
        if not self._loaded:
            self.load()
        cfg = self.config
        assert self.checkpoint is not None
        create_abort_file(cfg.abort_path)
        if self._sync_flush:
            self.group_commit = GroupCommitService(
                self.commit_log.mfq, self.checkpoint, cfg.sync_flush_timeout
            )
            cl_service: Service = self.group_commit
        else:
            cl_service = FlushCommitLogService(
                self.commit_log.mfq, self.checkpoint, cfg.flush_interval_commit_log,
                cfg.flush_commit_log_least_pages, cfg.flush_commit_log_thorough_interval,
            )  # fmt: skip
        cq_service = FlushConsumeQueueService(
            self.queues, self.index, self.dispatcher, self.checkpoint,
            cfg.flush_interval_consume_queue, cfg.flush_consume_queue_least_pages,
            cfg.flush_consume_queue_thorough_interval, self.commit_log.mfq,
        )  # fmt: skip
        self._services = [cl_service, cq_service, self.cleanup]
        self.cleanup.check_disk()
        for s in self._services:
            s.start()

    async def shutdown(self) -> None:
        """Stop services, flush everything, write the checkpoint, remove the abort marker."""
        if not self._running:
            return
        self._running = False
        self.dispatcher.waiters.cancel_all()
        for s in self._services:
            await s.stop()
        self._services = []
        self._close_files()

    def close(self) -> None:
        """Synchronous shutdown for use without an event loop (tools, tests)."""
        if not self._running:
            return
        self._running = False
        self.dispatcher.waiters.cancel_all()
        self._close_files()

    def _close_files(self) -> None:
        self.timer.close()
        self.commit_log.mfq.flush(0)
        self.queues.flush(0)
        self.index.write_header()
        index_ts = self.index.flush()
        cp = self.checkpoint
        if cp is not None:
            if self.commit_log.mfq.store_timestamp:
                cp.physic_msg_timestamp = self.commit_log.mfq.store_timestamp
            if self.dispatcher.last_dispatched_timestamp:
                cp.logics_msg_timestamp = self.dispatcher.last_dispatched_timestamp
            if index_ts:
                cp.index_msg_timestamp = index_ts
            dispatched = self.dispatcher.reput_from_offset
            if self.commit_log.mfq.flushed_where >= dispatched:
                cp.advance(dispatched, cp.epoch)
            cp.flush()
            cp.close()
        self._prealloc.shutdown()
        self.commit_log.mfq.close()
        self.queues.close()
        self.index.close()
        delete_abort_file(self.config.abort_path)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1

    async def __aenter__(self) -> MessageStore:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ writes
    def _check_writable(self) -> PutMessageResult | None:
        if not self._running:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, error_message="message store is shut down"
            )
        if self.config.broker_role is BrokerRole.SLAVE:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, error_message="a slave store is read-only"
            )
        if self.writes_refused is not None:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, error_message=self.writes_refused
            )
        if self.in_sync_replicas_short is not None:
            return PutMessageResult(
                PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
                error_message=self.in_sync_replicas_short,
            )
        if self.cleanup.disk_full:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                error_message=(
                    "disk full: usage above diskSpaceWarningLevelRatio "
                    f"{self.config.disk_space_warning_level_ratio}%, writes refused"
                ),
            )
        return None

    def _finish(self, r: AppendResult) -> PutMessageResult:
        if r.status is not PutMessageStatus.PUT_OK:
            return PutMessageResult(r.status, error_message=r.error_message)
        reqs = r.requests
        if len(reqs) == 1:
            self.dispatcher.dispatch_one(reqs[0])
        else:
            self.dispatcher.dispatch_batch(reqs)
        hook = self.on_append
        if hook is not None:
            hook(r.wrote_offset + r.wrote_bytes, len(reqs))
        ids = r.msg_ids
        return PutMessageResult(
            PutMessageStatus.PUT_OK, r.wrote_offset, r.wrote_bytes,
            ids[0] if len(ids) == 1 else ",".join(ids), r.queue_offset, len(reqs),
            r.store_timestamp,
        )  # fmt: skip

    def append_message(self, msg: BrokerMessage) -> PutMessageResult:
        """Append and dispatch one message without waiting for a flush.

        A message with a DELAY level is stored in SCHEDULE_TOPIC_XXXX instead (`delay_levels.py`).
        """
        refused = self._check_writable()
        if refused is not None:
            return refused
        if TIMER_MARK in msg.properties:  # cheap test first: most messages are not timers
            timed = self._timer_put(msg)
            if isinstance(timed, PutMessageResult):
                return timed
            msg = timed
        if "DELAY\x01" in msg.properties:  # cheap test first: most messages are not delayed
            msg = schedule(msg, self._max_delay_level)
        return self._finish(self.commit_log.put(msg))

    def append_due(self, msg: BrokerMessage) -> PutMessageResult:
        """Append a delay-level message now due into its real queue, as it is: its DELAY
        property stays (Apache keeps it on the delivered message), so `append_message` would
        park it again."""
        refused = self._check_writable()
        if refused is not None:
            return refused
        return self._finish(self.commit_log.put(msg))

    def _timer_put(self, msg: BrokerMessage) -> BrokerMessage | PutMessageResult:
        """The timer-topic copy of a timer message (`timer/transform.py`), or its refusal."""
        timer = self.timer
        out = to_timer(msg, self.clock(), timer.precision, timer.max_delay_sec, timer.enabled)
        if isinstance(out, PutMessageStatus):
            return PutMessageResult(out, error_message=_TIMER_REFUSALS[out].format(
                max_ms=timer.max_delay_sec * 1000, enabled=str(timer.enabled).lower()))
        if out.topic == TIMER_TOPIC and msg.topic != TIMER_TOPIC:  # parked
            if timer.is_reject_message(out):
                return PutMessageResult(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
                                        error_message="timer message is under flow control")
            timer.put_by_topic[msg.topic] += 1
        return out

    def append_many(self, msgs: Sequence[BrokerMessage]) -> list[PutMessageResult]:
        """`append_message` for messages received together, in order: one commit-log lock,
        one store time and one dispatch pass for all of them; one result each."""
        refused = self._check_writable()
        if refused is not None:
            return [refused] * len(msgs)
        max_level = self._max_delay_level
        timed: dict[int, PutMessageResult] = {}
        if any(TIMER_MARK in m.properties for m in msgs):
            kept: list[BrokerMessage] = []
            for i, m in enumerate(msgs):
                out = self._timer_put(m) if TIMER_MARK in m.properties else m
                if isinstance(out, PutMessageResult):
                    timed[i] = out
                else:
                    kept.append(out)
            msgs = kept
        msgs = [schedule(m, max_level) if "DELAY\x01" in m.properties else m for m in msgs]
        appended = self.commit_log.put_many(msgs)
        reqs = [r.requests[0] for r in appended if r.status is PUT_OK]
        if reqs:
            self.dispatcher.dispatch_many(reqs)
            hook = self.on_append
            if hook is not None:
                last = reqs[-1]
                hook(last.commit_log_offset + last.msg_size, len(reqs))
        results = [
            _new(PutMessageResult, (PUT_OK, r.wrote_offset, r.wrote_bytes, r.msg_ids[0],
                                    r.queue_offset, 1, r.store_timestamp, ""))
            if r.status is PUT_OK
            else PutMessageResult(r.status, error_message=r.error_message)
            for r in appended
        ]
        for i in sorted(timed):  # refused timers, back in their places
            results.insert(i, timed[i])
        return results

    def append_messages(self, batch: BatchMessage) -> PutMessageResult:
        """Append and dispatch a batch (one pass, consecutive queue offsets); no flush wait."""
        refused = self._check_writable()
        if refused is not None:
            return refused
        return self._finish(self.commit_log.put_batch(batch))

    put_message = _flushed(append_message, "Append one message")
    put_messages = _flushed(append_messages, "Append a batch")

    async def flushed(self, result: PutMessageResult) -> PutMessageResult:
        """The result of an `append_*` once its bytes are on disk under SYNC_FLUSH (what
        `put_message` returns for the same append); at once otherwise."""
        gc = self._group_commit_for(result)
        return result if gc is None else await self._await_flush(result, gc)

    def _group_commit_for(self, result: PutMessageResult) -> GroupCommitService | None:
        """The group commit an append must wait for (None: answer it now; under SYNC_FLUSH
        before the store started, the append is flushed here)."""
        gc = self.group_commit
        if result.status is not PutMessageStatus.PUT_OK:
            return None
        if gc is None and self._sync_flush:
            self.commit_log.mfq.flush(0)
        return gc

    async def _await_flush(
        self, result: PutMessageResult, gc: GroupCommitService
    ) -> PutMessageResult:
        if await gc.wait_flushed(result.wrote_offset + result.wrote_bytes):
            return result
        return PutMessageResult(
            PutMessageStatus.FLUSH_DISK_TIMEOUT, result.wrote_offset, result.wrote_bytes,
            result.msg_id, result.queue_offset, result.msg_num, result.store_timestamp,
            f"not flushed within syncFlushTimeout {self.config.sync_flush_timeout} ms",
        )  # fmt: skip

    def append_raw(self, data: bytes, offset: int | None = None) -> int:
        """Append commit-log bytes (HA slave) and dispatch the records they complete.

        Args:
            data: raw commit-log bytes; they may end inside a record.
            offset: where `data` belongs; it must be the current max offset, except that a
                store without data starts its commit log there.

        Returns:
            The number of records dispatched, or -1 if the bytes were refused (they do not
            start at the end of the log, or do not fit in its segment).
        """
        empty = self.commit_log.max_offset == 0
        if not self.commit_log.append_raw(data, offset):
            return -1
        if empty and offset:
            self.dispatcher.reput_from_offset = offset
        return self.dispatcher.reput()

    def read_commit_log(self, offset: int, max_size: int) -> bytes | None:
        """Up to `max_size` bytes from `offset`, all from one segment (HA transfers).

        Returns b"" at the end of the log and None if `offset` is not in the log (below
        its min offset, or past its end).
        """
        mf = self.commit_log.mfq.find(offset)
        if mf is None:
            return b"" if offset == self.commit_log.max_offset else None
        pos = offset - mf.file_from_offset
        return mf.read(pos, max(0, min(max_size, mf.wrote_position - pos)))

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and past commit-log `offset`: records, queue entries, index
        files, and forget the queue offsets they had taken (a diverged HA tail).

        The queues' next offsets are recomputed from what remains, as recovery does.
        """
        self.dispatcher.reput(until=min(offset, self.commit_log.max_offset))
        if self.checkpoint is not None:
            self.checkpoint.lower(offset)  # on disk before the records go
        self.commit_log.mfq.truncate_dirty(offset)
        self.queues.truncate_dirty(offset)
        self.index.truncate(offset)
        self.dispatcher.reput_from_offset = min(self.dispatcher.reput_from_offset, offset)
        self.commit_log.topic_queue_table = self.queues.queue_offsets()

    def complete_records_end(self) -> int:
        """End of the last complete record (an HA slave's log may end inside one)."""
        self.dispatcher.reput()
        return min(self.dispatcher.reput_from_offset, self.commit_log.max_offset)

    def change_role(self, role: BrokerRole) -> None:
        """Switch between SLAVE and a master role.  A store that becomes a master first
        drops a partial record at its end and takes its queue offsets from its queues."""
        if role is not BrokerRole.SLAVE and self.config.broker_role is BrokerRole.SLAVE:
            end = self.complete_records_end()
            if end < self.commit_log.max_offset:
                self.truncate_to(end)
            self.commit_log.topic_queue_table = self.queues.queue_offsets()
        self.config.broker_role = role

    # ------------------------------------------------------------------ reads
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to `max_msg_nums` records of a queue from logical `offset` (PULL_MESSAGE).

        Raises:
            StoreClosedError: the store is shut down.
        """
        if not self._running:
            raise StoreClosedError("message store is shut down")
        return self.reader.get_message(topic, queue_id, offset, max_msg_nums, message_filter)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.min_offset if cq else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.queues.find(topic, queue_id)
        entry = cq.get_entry(offset) if cq else None
        return entry[0] if entry else 0

    def get_queue_entry(
        self, topic: str, queue_id: int, offset: int
    ) -> tuple[int, int, int] | None:
        """(commit-log offset, size, tags code) of a consume-queue entry, or None."""
        cq = self.queues.find(topic, queue_id)
        return cq.get_entry(offset) if cq else None

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First logical offset stored at or after `timestamp` (max offset if none)."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp, self.commit_log.get_store_timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.queues.find(topic, queue_id)
        entry = cq.get_entry(offset) if cq else None
        if entry is None:
            return -1
        return self.commit_log.get_store_timestamp(entry[0], entry[1])

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue, or of the whole commit log."""
        if topic is not None:
            cq = self.queues.find(topic, queue_id)
            return self.get_message_store_timestamp(topic, queue_id, cq.min_offset) if cq else -1
        first = self.commit_log.mfq.first
        if first is None:
            return -1
        return self.commit_log.get_store_timestamp(first.file_from_offset, 4096)

    def look_message_by_offset(
        self, commit_log_offset: int, size: int | None = None
    ) -> bytes | None:
        """The record at a physical offset (VIEW_MESSAGE_BY_ID), or None."""
        if size is None:
            head = self.commit_log.get_data(commit_log_offset, 4)
            if head is None:
                return None
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0:
                return None
        return self.commit_log.get_data(commit_log_offset, size)

    def query_message(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryMessageResult:
        """Records whose key (KEYS or UNIQ_KEY) is `key`, stored within [begin, end]."""
        max_num = min(max_num, self.config.max_msgs_num_batch)
        offsets, last_ts, last_phy = self.index.query(topic, key, max_num, begin, end)
        result = QueryMessageResult([], last_ts, last_phy)
        for phy in offsets:
            data = self.look_message_by_offset(phy)
            if data is not None:
                result.messages.append(data)
        return result

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a logical offset lies beyond the in-memory window
        (`checkInDiskByConsumeOffset`); False when there is no such message."""
        return self.reader.check_in_disk_by_consume_offset(topic, queue_id, offset)

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def get_flushed_offset(self) -> int:
        return self.commit_log.flushed_offset

    def flush_behind_bytes(self) -> int:
        """Commit-log bytes written but not yet flushed (5.x `flushBehindBytes`)."""
        return max(self.commit_log.max_offset - self.commit_log.flushed_offset, 0)

    def dispatch_behind_bytes(self) -> int:
        """Commit-log bytes not yet dispatched to consume queues (5.x `dispatchBehindBytes`)."""
        return max(self.commit_log.max_offset - self.dispatcher.reput_from_offset, 0)

    def topic_queues(self) -> dict[str, list[int]]:
        return {t: sorted(q) for t, q in self.queues.table.items()}

    # ------------------------------------------------------------------ long polling
    def wait_for_arrival(self, topic: str, queue_id: int, offset: int) -> asyncio.Future[int]:
        """An `asyncio.Future[int]` resolved with the max offset once it is > `offset`."""
        return self.dispatcher.waiters.wait(
            topic, queue_id, offset, self.get_max_offset_in_queue(topic, queue_id)
        )

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.dispatcher.waiters.listeners.append(listener)

    # ------------------------------------------------------------------ maintenance
    @property
    def disk_full(self) -> bool:
        return self.cleanup.disk_full

    async def delete_expired_files(self, manual: bool = True) -> CleanupReport:
        """One cleanup round now (DELETE_EXPIRED_COMMITLOG when `manual`)."""
        return await self.cleanup.clean(manual=manual)

    def plan_expired_files(self, manual: bool = True) -> CleanupReport:
        """Dry run: which files a cleanup round would delete, deleting nothing."""
        return self.cleanup.plan(manual=manual)

    def clean_expired_consume_queues(self) -> list[str]:
        """CLEAN_EXPIRED_CONSUMEQUEUE; returns `topic/queueId` of removed queues."""
        return self.cleanup.clean_expired_consume_queues()

    def clean_unused_topics(self, keep: set[str], written_before: int | None = None
                            ) -> list[str]:
        """CLEAN_UNUSED_TOPIC: destroy the queues of topics not in `keep` and forget their
        next queue offsets, so a topic created again starts at offset 0 (`cleanUnusedTopic`).
        With `written_before`, a topic whose queues hold a message at or after that commit-log
        offset is kept (a slave's sync: the topic may be newer than the table it read)."""
        if written_before is not None:
            keep = keep | {cq.topic for cq in self.queues
                           if cq.topic not in keep and self._last_phy(cq) >= written_before}
        removed: list[str] = []
        for cq in list(self.queues):
            if cq.topic not in keep:
                removed.append(f"{cq.topic}/{cq.queue_id}")
                self.queues.remove(cq)
                self.commit_log.topic_queue_table.pop((cq.topic, cq.queue_id), None)
        for key in [k for k in self.commit_log.topic_queue_table if k[0] not in keep]:
            del self.commit_log.topic_queue_table[key]
        return removed

    @staticmethod
    def _last_phy(cq: ConsumeQueue) -> int:
        """The commit-log offset of the queue's last message (-1 when empty)."""
        entry = cq.get_entry(cq.max_offset - 1) if cq.max_offset > 0 else None
        return entry[0] if entry is not None else -1
