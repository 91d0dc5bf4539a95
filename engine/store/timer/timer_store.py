"""`TimerMessageStore`: enqueue parked timers into the wheel, deliver due slots, recover.

How this works (docs/timers.md):
  * Enqueue: the timer topic's consume queue (queue 0; its tags code is TIMER_OUT_MS) is read
    from `queue_offset`; each entry becomes a timer-log unit chained into its slot's list.  An
    entry whose slot has already been taken (`deliver_ms < read_ms`) is delivered at once.
  * Dequeue (master only): slot `read_ms` is taken once `now >= read_ms + precision`: its
    chain is walked into `pending` and `read_ms` moves on; pending units are delivered in
    store order; when the slot is done `commit_read_ms` follows and `delivered_from_phy`
    becomes the commit log's end (every later delivery lies after it).
  * Checkpoint: (commit_read_ms, timer-log end, queue_offset, delivered_from_phy), taken
    together on the event loop, written after the log and the wheel are flushed.
  * Exactly once: after a crash, or when a slave takes over, the deliveries in the commit log
    from delivered_from_phy on are counted by identity (`recovery.delivered_since`); a unit
    whose identity is counted is skipped once instead of delivered again.

Threading: everything but `flush_files()` runs on the event loop thread, like the store.
"""

from __future__ import annotations

import logging
import os
import random
from collections import Counter, deque
from typing import TYPE_CHECKING, NamedTuple

from engine.protocol.errors import ProtocolError
from engine.protocol.message import (
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    BrokerMessage,
    decode_record,
    property_value,
)
from engine.store.errors import StoreConfigError
from engine.store.record_scan import TIMER_TOPIC
from engine.store.results import PutMessageStatus
from engine.store.timer.checkpoint import TimerCheckpoint, read_checkpoint, write_checkpoint
from engine.store.timer.recovery import cut_wheel, delivered_since
from engine.store.timer.timer_log import TimerLog
from engine.store.timer.transform import (
    Identity,
    delivery,
    effective_precision,
    timer_identity,
)
from engine.store.timer.wheel import Slot, TimerWheel

if TYPE_CHECKING:
    from engine.store.message_store import MessageStore

log = logging.getLogger(__name__)

BLANK_SLOTS = 60  # Apache's TIMER_BLANK_SLOTS: the wheel's span minus these bounds a delay
PUT_BATCH = 256
# Puts that can never succeed: log and skip rather than block the wheel forever.
_PERMANENT = frozenset({
    PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
})


class Due(NamedTuple):
    """A timer to deliver: where its parked record is, and when it was enqueued."""

    offset_py: int
    size_py: int
    enqueue_ms: int
    queue_offset: int  # -1 when it came from the wheel


class TimerMessageStore:
    """The timer log, wheel and checkpoint of one store, and what moves between them."""

    def __init__(self, store: MessageStore) -> None:
        cfg = store.config
        self.store = store
        self.enabled = cfg.timer_wheel_enable
        self.precision = effective_precision(cfg.timer_precision_ms)
        self.max_delay_sec = cfg.timer_max_delay_sec
        self.congest_num = cfg.timer_congest_num_each_slot
        self.log: TimerLog | None = None
        self.wheel: TimerWheel | None = None
        self.read_ms = 0            # currReadTimeMs: slots before it are taken
        self.commit_read_ms = 0     # commitReadTimeMs: slots before it are delivered
        self.queue_offset = 0       # currQueueOffset: next timer-queue entry to enqueue
        self.master_queue_offset = 0
        self.delivered_from_phy = 0
        self.pending: deque[Due] = deque()   # the taken slot's units, in store order
        self.immediate: deque[Due] = deque()  # enqueued after their slot was taken
        self.waiting = 0                     # units in the wheel not yet delivered
        self.redelivery: Counter[Identity] = Counter()  # deliveries to skip (recovery)
        self.enqueue_total = 0
        self.dequeue_total = 0
        self.dequeue_by_topic: Counter[str] = Counter()
        self.put_by_topic: Counter[str] = Counter()  # timers parked, by real topic
        self.skipped_total = 0
        self.last_late_ms = 0       # when an enqueue last found its slot taken
        self.last_late_store_ms = 0
        self.written: TimerCheckpoint | None = None  # the checkpoint last written or read

    # ------------------------------------------------------------------ files
    @property
    def opened(self) -> bool:
        return self.log is not None

    def _files_exist(self) -> bool:
        cfg = self.store.config
        return (os.path.isdir(cfg.timer_log_dir) or os.path.exists(cfg.timer_wheel_path)
                or os.path.exists(cfg.timer_checkpoint_path))

    def _open(self) -> tuple[TimerLog, TimerWheel]:
        cfg = self.store.config
        wheel = TimerWheel(cfg.timer_wheel_path, self.precision)
        if self.max_delay_sec * 1000 > wheel.span_ms - BLANK_SLOTS * self.precision:
            wheel.close()
            raise StoreConfigError(
                f"timerMaxDelaySec={self.max_delay_sec} is beyond the timer wheel's span of "
                f"{wheel.span_ms // 1000 - BLANK_SLOTS * self.precision // 1000} s; lower it")
        timer_log = TimerLog(cfg.timer_log_dir, cfg.mapped_file_size_timer_log)
        timer_log.load()
        self.log, self.wheel = timer_log, wheel
        return timer_log, wheel

    def _ensure_open(self) -> tuple[TimerLog, TimerWheel]:
        """Open (creating) the files on the first timer; the first checkpoint is written at
        once, so that recovery never needs to look before this moment."""
        if self.log is not None and self.wheel is not None:
            return self.log, self.wheel
        now = self.store.clock()
        timer_log, wheel = self._open()
        if self.read_ms == 0:  # else a slave already follows its master's progress
            self.read_ms = self.commit_read_ms = now // self.precision * self.precision
            self.delivered_from_phy = self.store.get_max_phy_offset()
        first = self.snapshot()
        assert first is not None  # nothing was taken yet
        write_checkpoint(self.store.config.timer_checkpoint_path, first)
        self.written = first
        return timer_log, wheel

    def load(self) -> None:
        """Open and recover the files if a previous run made them (after the store's own
        recovery: the timer queue and the commit log are the truth)."""
        store = self.store
        self.queue_offset = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        if not self._files_exist():
            return
        timer_log, wheel = self._open()
        cp = read_checkpoint(store.config.timer_checkpoint_path) or TimerCheckpoint()
        self.written = cp
        end = min(cp.log_flush_pos, timer_log.end())
        cut = cut_wheel(wheel, timer_log, end)
        timer_log.recover(end)
        low = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        high = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        self.queue_offset = min(max(cp.queue_offset, low), high)
        self.master_queue_offset = cp.master_queue_offset or self.queue_offset
        now = store.clock()
        self.read_ms = self.commit_read_ms = (
            cp.read_ms or now // self.precision * self.precision)
        self.delivered_from_phy = cp.delivered_from_phy
        self.waiting = timer_log.count_from(self.read_ms, self.precision)
        log.info("timer store recovered: read %d, queue offset %d of %d, log end %d (%d units "
                 "cut), %d waiting", self.read_ms, self.queue_offset, high, end, cut,
                 self.waiting)

    def take_over(self) -> None:
        """Before delivering (after recovery, or when a slave becomes master): count the
        deliveries already in the commit log, and queue the parked timers whose slot passed
        while another broker was the one delivering."""
        if not self.opened:
            return
        store = self.store
        self.redelivery = delivered_since(store.read_commit_log, self.delivered_from_phy,
                                          store.get_max_phy_offset())
        for q in range(min(self.master_queue_offset, self.queue_offset), self.queue_offset):
            entry = store.get_queue_entry(TIMER_TOPIC, 0, q)
            if entry is not None and entry[2] < self.read_ms:
                self.immediate.append(Due(entry[0], entry[1], store.clock(), q))
        self.master_queue_offset = self.queue_offset
        if self.log is not None:
            self.waiting = self.log.count_from(self.read_ms, self.precision)
        if self.redelivery:
            log.warning("timer: %d deliveries made before the restart or switch are in the "
                        "commit log; they are not delivered again",
                        sum(self.redelivery.values()))

    def snapshot(self) -> TimerCheckpoint | None:
        """The progress as a checkpoint, or None while it cannot be one: timers taken from
        the timer queue straight for delivery (`immediate`) are in neither the timer log nor
        the commit log's deliveries yet, so a checkpoint past them could lose them."""
        if self.immediate:
            return None
        end = self.log.end() if self.log is not None else 0
        cp = TimerCheckpoint(
            read_ms=self.commit_read_ms, log_flush_pos=end, queue_offset=self.queue_offset,
            master_queue_offset=self.master_queue_offset, timestamp=self.store.clock(),
            delivered_from_phy=self.delivered_from_phy)
        return cp

    def last_checkpoint(self) -> TimerCheckpoint:
        """The current progress if it can be a checkpoint, else the last one written."""
        return self.snapshot() or self.written or TimerCheckpoint()

    def flush_files(self, cp: TimerCheckpoint | None) -> None:
        """Flush log and wheel, then write `cp` if there is one (blocking: from a worker
        thread)."""
        if self.log is None or self.wheel is None:
            return
        self.log.flush()
        self.wheel.flush()
        if cp is not None:
            write_checkpoint(self.store.config.timer_checkpoint_path, cp)
            self.written = cp

    def close(self) -> None:
        if self.log is None or self.wheel is None:
            return
        self.flush_files(self.snapshot())
        self.log.close()
        self.wheel.close()
        self.log = self.wheel = None

    # ------------------------------------------------------------------ put side
    def is_reject_message(self, msg: BrokerMessage) -> bool:
        """`isReject`: flow control when the message's slot already holds more than
        timerCongestNumEachSlot units (certain at twice that, by chance in between)."""
        if self.wheel is None or self.congest_num >= 2**31 - 1:
            return False
        out = property_value(msg.properties, PROPERTY_TIMER_OUT_MS)
        if not out or not out.isdigit():
            return False
        num = self.wheel.get(int(out)).num
        if num <= self.congest_num:
            return False
        return num >= self.congest_num * 2 or random.randrange(1000) < 1000 * (
            num - self.congest_num) / self.congest_num

    # ------------------------------------------------------------------ enqueue
    def enqueue(self, limit: int, deliver_late: bool) -> int:
        """Move up to `limit` new timer-queue entries into the wheel; returns how many."""
        store = self.store
        high = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        q = max(self.queue_offset, store.get_min_offset_in_queue(TIMER_TOPIC, 0))
        if q >= high:
            self.queue_offset = q
            return 0
        timer_log, wheel = self._ensure_open()
        now = store.clock()
        write_ms = now // self.precision * self.precision
        precision = self.precision
        done = 0
        while q < high and done < limit:
            entry = store.get_queue_entry(TIMER_TOPIC, 0, q)
            if entry is None:
                break
            offset_py, size_py, deliver_ms = entry
            if deliver_ms < self.read_ms and deliver_late:
                self.immediate.append(Due(offset_py, size_py, now, q))
                self.last_late_ms, self.last_late_store_ms = now, deliver_ms
            else:
                slot_ms = deliver_ms // precision * precision
                slot = wheel.get(slot_ms)
                pos = timer_log.append(slot.last, write_ms, deliver_ms, offset_py, size_py)
                wheel.put(slot_ms, Slot(pos if slot.first < 0 else slot.first, pos,
                                        slot.num + 1))
                if slot_ms >= self.read_ms:  # (a slave parks late ones for a take-over)
                    self.waiting += 1
            q += 1
            done += 1
        self.queue_offset = q
        self.enqueue_total += done
        return done

    # ------------------------------------------------------------------ dequeue
    def take_slot(self, now: int) -> bool:
        """Take slot `read_ms` into `pending` if it is due; False when nothing is due."""
        if self.pending or self.read_ms + self.precision > now:
            return False
        wheel, timer_log = self.wheel, self.log
        if wheel is None or timer_log is None or self.waiting <= 0:
            # nothing parked: jump to the current slot (later arrivals for earlier slots
            # are delivered at once by enqueue)
            self.read_ms = self.commit_read_ms = now // self.precision * self.precision
            self.delivered_from_phy = self.store.get_max_phy_offset()
            return False
        slot = wheel.get(self.read_ms)
        units: list[Due] = []
        pos = slot.last
        while pos >= 0 and len(units) < slot.num:
            unit = timer_log.read(pos)
            if unit is None:
                log.error("timer: slot %d lost its unit at %d; %d units skipped", self.read_ms,
                          pos, slot.num - len(units))
                break
            units.append(Due(unit.offset_py, unit.size_py, unit.write_ms, -1))
            pos = unit.prev
        self.waiting -= slot.num
        self.pending.extend(reversed(units))
        self.read_ms += self.precision
        if not self.pending:
            self._slot_done()
        return True

    def _slot_done(self) -> None:
        self.commit_read_ms = self.read_ms
        self.delivered_from_phy = self.store.get_max_phy_offset()

    def deliver(self, now: int, budget: int) -> tuple[int, bool]:
        """Deliver up to `budget` due timers (immediate ones first, then the taken slot).

        Returns:
            (how many were handled, whether a put failed and the rest should wait).
        """
        handled = 0
        for queue in (self.immediate, self.pending):
            while queue and handled < budget:
                chunk = [queue.popleft() for _ in range(min(PUT_BATCH, len(queue),
                                                            budget - handled))]
                retry = self._put(chunk, now)
                handled += len(chunk) - len(retry)
                if retry:
                    queue.extendleft(reversed(retry))
                    return handled, True
            if queue is self.pending and not queue and self.commit_read_ms < self.read_ms:
                self._slot_done()
        return handled, False

    def _put(self, chunk: list[Due], now: int) -> list[Due]:
        """Put a chunk's deliveries; returns the timers whose put must be retried."""
        made = [(due, self._message(due, now)) for due in chunk]
        ready = [(due, msg) for due, msg in made if msg is not None]
        if not ready:
            return []
        results = self.store.append_many([msg for _, msg in ready])
        retry: list[Due] = []
        for (due, msg), result in zip(ready, results, strict=True):
            if result.status is PutMessageStatus.PUT_OK:
                self.dequeue_total += 1
                self.dequeue_by_topic[msg.topic] += 1
            elif result.status in _PERMANENT:
                log.error("timer: %s refused a due message for good (%s %s); it stays in %s",
                          msg.topic, result.status, result.error_message, TIMER_TOPIC)
            else:
                if not retry:
                    log.warning("timer: put to %s failed (%s %s); retrying", msg.topic,
                                result.status, result.error_message)
                retry.append(due)
        return retry

    def _message(self, due: Due, now: int) -> BrokerMessage | None:
        """The delivery of one due timer, None when there is nothing to deliver."""
        data = self.store.look_message_by_offset(due.offset_py, due.size_py)
        if data is None:
            log.warning("timer: commit-log offset %d is gone; timer skipped", due.offset_py)
            return None
        try:
            record = decode_record(data)
        except ProtocolError as exc:
            log.error("timer: unreadable record at %d (%s); skipped", due.offset_py, exc)
            return None
        if self.redelivery:
            ident = timer_identity(record)
            if ident is not None and self.redelivery[ident] > 0:
                self.redelivery[ident] -= 1
                if self.redelivery[ident] == 0:
                    del self.redelivery[ident]
                self.skipped_total += 1
                return None
        if PROPERTY_TIMER_DEL_UNIQKEY.encode() in record.properties_raw:
            return None  # a 5.x delete marker: never delivered (deleting is not supported)
        msg = delivery(record, due.enqueue_ms, now)
        if msg is None:
            log.error("timer: record at %d has no REAL_TOPIC/REAL_QID; skipped", due.offset_py)
        return msg

    # ------------------------------------------------------------------ slave
    def follow(self, cp: TimerCheckpoint) -> None:
        """Adopt the master's progress (a slave's sync): its read time, its queue offset and
        where its undelivered-for-sure region starts."""
        if cp.read_ms <= 0:
            return
        if self.wheel is not None:
            t = self.read_ms
            while t < cp.read_ms and self.waiting > 0:
                self.waiting -= self.wheel.get(t).num
                t += self.precision
            self.waiting = max(self.waiting, 0)
        if cp.read_ms > self.read_ms:
            self.read_ms = self.commit_read_ms = cp.read_ms
            self.delivered_from_phy = cp.delivered_from_phy
        self.master_queue_offset = cp.queue_offset

    # ------------------------------------------------------------------ observability
    def enqueue_behind_messages(self) -> int:
        """timerOffsetBehind: timer-queue entries not yet in the wheel."""
        return max(self.store.get_max_offset_in_queue(TIMER_TOPIC, 0) - self.queue_offset, 0)

    def dequeue_behind_ms(self, now: int) -> int:
        """How far the wheel's read time is behind now (Apache's getDequeueBehindMillis)."""
        if not self.opened:
            return 0
        return max(now - self.read_ms, 0)

    def enqueue_behind_ms(self, now: int) -> int:
        if now - self.last_late_ms < 2000:
            return now - self.last_late_store_ms
        return 0

    def congest_num_total(self) -> int:
        """timerCongestNum: timers waiting in the wheel or taken and not yet delivered."""
        return self.waiting + len(self.pending) + len(self.immediate)

