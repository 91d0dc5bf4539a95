"""`TimerMessageStore`: park timers in the wheel, take due slots, deliver, recover.

How this works (docs/timers.md):
  * Enqueue: the timer topic's consume queue (queue 0; its tags code is TIMER_OUT_MS) is read
    from `queue_offset`; each entry becomes a timer-log unit chained into its slot's list.  An
    entry whose slot was already taken joins the newest open slot (`inflight.py`).
  * Take (master only): slot `read_ms` is taken when its time begins: its chain is walked and
    its timers go into the in-flight heap by the time each asked for; `read_ms` moves on.
  * Deliver: timers whose time has come are put into their real queues, oldest first.
  * Recall (5.3's RECALL_MESSAGE): a delete marker is a timer of its own, parked for the same
    slot as the timer it withdraws, with TIMER_DEL_UNIQKEY = "REAL_TOPIC+UNIQ_KEY" of that
    timer.  Taking a slot reads its markers first (as 5.3 reads a slot's delete units before
    the others); the timers they name are not delivered, and markers never are.  A marker
    that joins a later slot (enqueued after its own was taken) still withdraws the timer if
    it has not been delivered yet.
  * Checkpoint: (oldest open slot, timer-log end, queue_offset, the commit log's end when
    that slot was taken), taken together on the event loop, written after the log and the
    wheel are flushed.
  * Exactly once: after a crash, or when a slave takes over, the deliveries in the commit log
    from that offset on are counted by identity (`recovery.delivered_since`); a timer whose
    identity is counted is skipped once instead of delivered again.

Threading: everything but `flush_files()` runs on the event loop thread, like the store.
"""

from __future__ import annotations

import logging
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from engine.protocol.errors import ProtocolError
from engine.protocol.message import (
    PROPERTY_TIMER_OUT_MS,
    BrokerMessage,
    MessageRecord,
    decode_record,
    property_value,
)
from engine.store.config import MessageStoreConfig
from engine.store.errors import StoreConfigError
from engine.store.record_scan import TIMER_TOPIC
from engine.store.results import PutMessageResult, PutMessageStatus
from engine.store.timer.checkpoint import TimerCheckpoint, read_checkpoint, write_checkpoint
from engine.store.timer.inflight import Due, InFlight
from engine.store.timer.recovery import cut_wheel, delivered_since
from engine.store.timer.timer_log import TimerLog, Unit
from engine.store.timer.transform import (
    Identity,
    asked_time,
    delete_key,
    delivery,
    effective_precision,
    target_key,
    timer_identity,
)
from engine.store.timer.wheel import Slot, TimerWheel

log = logging.getLogger(__name__)

BLANK_SLOTS = 60  # Apache's TIMER_BLANK_SLOTS: the wheel's span minus these bounds a delay
PUT_BATCH = 256
# Puts that can never succeed: log and skip rather than block the wheel forever.
_PERMANENT = frozenset({
    PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
})


class StoreAccess(Protocol):
    """What the timer store uses of its message store: the timer queue's entries, the commit
    log's records and end, and puts of the messages that fall due."""

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_queue_entry(self, topic: str, queue_id: int, offset: int
                        ) -> tuple[int, int, int] | None: ...

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None
                               ) -> bytes | None: ...

    def read_commit_log(self, offset: int, max_size: int) -> bytes | None: ...

    def get_max_phy_offset(self) -> int: ...

    def append_many(self, msgs: Sequence[BrokerMessage]) -> list[PutMessageResult]: ...


class TimerMessageStore:
    """The timer log, wheel and checkpoint of one store, and what moves between them."""

    def __init__(self, config: MessageStoreConfig, clock: Callable[[], int],
                 store: StoreAccess) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.enabled = config.timer_wheel_enable
        self.precision = effective_precision(config.timer_precision_ms)
        self.max_delay_sec = config.timer_max_delay_sec
        self.congest_num = config.timer_congest_num_each_slot
        self.log: TimerLog | None = None
        self.wheel: TimerWheel | None = None
        self.read_ms = 0            # currReadTimeMs: slots before it are taken
        self.queue_offset = 0       # currQueueOffset: next timer-queue entry to enqueue
        self.master_queue_offset = 0
        self.recovered_phy = 0      # deliveredFromPhy as last read or followed
        self.delivering = False     # a master that took over
        self.inflight = InFlight(self.precision)
        self.waiting = 0            # units in slots not yet taken
        self.redelivery: Counter[Identity] = Counter()  # deliveries to skip (recovery)
        self.enqueue_total = 0
        self.dequeue_total = 0
        self.dequeue_by_topic: Counter[str] = Counter()
        self.put_by_topic: Counter[str] = Counter()  # timers parked, by real topic
        self.skipped_total = 0
        self.recalled_total = 0     # timers withdrawn by a delete marker
        #: delete keys of the markers taken, with the slot each came in (dropped once that
        #: slot is delivered).
        self.deleted: dict[str, int] = {}
        self.last_late_ms = 0       # when an enqueue last found its slot taken
        self.last_late_store_ms = 0
        self.written: TimerCheckpoint | None = None  # the checkpoint last written or read

    @property
    def commit_read_ms(self) -> int:
        """commitReadTimeMs: slots before it are delivered."""
        oldest = self.inflight.oldest_open()
        return self.read_ms if oldest is None else oldest

    @property
    def delivered_from_phy(self) -> int:
        """Every delivery the checkpoint's read time and queue offset do not cover is at or
        after this commit-log offset."""
        oldest = self.inflight.oldest_open()
        if oldest is not None:
            return self.inflight.slots[oldest].phy
        if not self.delivering:
            return self.recovered_phy
        return self.store.get_max_phy_offset()

    # ------------------------------------------------------------------ files
    @property
    def opened(self) -> bool:
        return self.log is not None

    def _files_exist(self) -> bool:
        cfg = self.config
        return (os.path.isdir(cfg.timer_log_dir) or os.path.exists(cfg.timer_wheel_path)
                or os.path.exists(cfg.timer_checkpoint_path))

    def _open(self) -> tuple[TimerLog, TimerWheel]:
        cfg = self.config
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
        now = self.clock()
        timer_log, wheel = self._open()
        if self.read_ms == 0:  # else a slave already follows its master's progress
            self.read_ms = now // self.precision * self.precision
            self.recovered_phy = self.store.get_max_phy_offset()
        first = self.snapshot()
        write_checkpoint(self.config.timer_checkpoint_path, first)
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
        cp = read_checkpoint(self.config.timer_checkpoint_path) or TimerCheckpoint()
        self.written = cp
        end = min(cp.log_flush_pos, timer_log.end())
        cut = cut_wheel(wheel, timer_log, end)
        timer_log.recover(end)
        low = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        high = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        self.queue_offset = min(max(cp.queue_offset, low), high)
        self.master_queue_offset = cp.master_queue_offset or self.queue_offset
        now = self.clock()
        self.read_ms = cp.read_ms or now // self.precision * self.precision
        self.recovered_phy = cp.delivered_from_phy
        self.waiting = timer_log.count_from(self.read_ms, self.precision)
        log.info("timer store recovered: read %d, queue offset %d of %d, log end %d (%d units "
                 "cut), %d waiting", self.read_ms, self.queue_offset, high, end, cut,
                 self.waiting)

    def take_over(self) -> None:
        """Before delivering (after recovery, or when a slave becomes master): count the
        deliveries already in the commit log, and re-park the timers whose slot passed while
        another broker was the one delivering (they join slot `read_ms`)."""
        self.delivering = True
        if self.log is None or self.wheel is None:
            return
        store = self.store
        self.redelivery = delivered_since(store.read_commit_log, self.recovered_phy,
                                          store.get_max_phy_offset())
        write_ms = self.clock() // self.precision * self.precision
        for q in range(min(self.master_queue_offset, self.queue_offset), self.queue_offset):
            entry = store.get_queue_entry(TIMER_TOPIC, 0, q)
            if entry is not None and entry[2] < self.read_ms:
                self._chain(self.read_ms, write_ms, entry[0], entry[1])
        self.master_queue_offset = self.queue_offset
        self.waiting = self.log.count_from(self.read_ms, self.precision)
        if self.redelivery:
            log.warning("timer: %d deliveries made before the restart or switch are in the "
                        "commit log; they are not delivered again",
                        sum(self.redelivery.values()))

    def step_down(self) -> None:
        """No longer master: forget the open slots (their units stay chained; whoever
        delivers next takes them again from the oldest one)."""
        if not self.delivering:
            return
        self.recovered_phy = self.delivered_from_phy
        self.read_ms = self.commit_read_ms
        self.inflight = InFlight(self.precision)
        self.delivering = False
        if self.log is not None:
            self.waiting = self.log.count_from(self.read_ms, self.precision)

    def snapshot(self) -> TimerCheckpoint:
        end = self.log.end() if self.log is not None else 0
        return TimerCheckpoint(
            read_ms=self.commit_read_ms, log_flush_pos=end, queue_offset=self.queue_offset,
            master_queue_offset=self.queue_offset if self.delivering
            else self.master_queue_offset, timestamp=self.clock(),
            delivered_from_phy=self.delivered_from_phy)

    def flush_files(self, cp: TimerCheckpoint) -> None:
        """Flush log and wheel, then write `cp` (blocking: from a worker thread)."""
        if self.log is None or self.wheel is None:
            return
        self.log.flush()
        self.wheel.flush()
        write_checkpoint(self.config.timer_checkpoint_path, cp)
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
    def _chain(self, slot_ms: int, write_ms: int, offset_py: int, size_py: int) -> None:
        """Append a unit for a parked record and link it into slot `slot_ms`'s chain.  The
        unit's delivery time is that slot (as 5.3 writes the adjusted time of a rolled
        timer): recovery and the waiting count find a unit's chain by it; the time the timer
        asked for stays in its record."""
        assert self.log is not None and self.wheel is not None
        slot = self.wheel.get(slot_ms)
        pos = self.log.append(slot.last, write_ms, slot_ms, offset_py, size_py)
        self.wheel.put(slot_ms, Slot(pos if slot.first < 0 else slot.first, pos, slot.num + 1))
        if slot_ms >= self.read_ms:
            self.waiting += 1

    def enqueue(self, limit: int) -> int:
        """Move up to `limit` new timer-queue entries into the wheel; returns how many."""
        store = self.store
        high = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        # (above `high` only after an HA tail was cut: those entries are gone)
        q = min(max(self.queue_offset, store.get_min_offset_in_queue(TIMER_TOPIC, 0)), high)
        if q >= high:
            self.queue_offset = q
            return 0
        self._ensure_open()
        now = self.clock()
        write_ms = now // self.precision * self.precision
        precision = self.precision
        done = 0
        while q < high and done < limit:
            entry = store.get_queue_entry(TIMER_TOPIC, 0, q)
            if entry is None:
                break
            offset_py, size_py, deliver_ms = entry
            slot_ms = deliver_ms // precision * precision
            if slot_ms < self.read_ms:  # its slot was taken: it joins the newest open one
                self.last_late_ms, self.last_late_store_ms = now, deliver_ms
                target = self.inflight.newest_open() if self.delivering else None
                if target is None:
                    target = self.read_ms
                self._chain(target, write_ms, offset_py, size_py)
                if target < self.read_ms:
                    record = self._record(offset_py, size_py)
                    key = None if record is None else delete_key(record)
                    if key is not None:
                        self.deleted[key] = target
                    elif record is not None:
                        self.inflight.add(asked_time(record, precision), target,
                                          offset_py, size_py, write_ms, record)
            else:
                self._chain(slot_ms, write_ms, offset_py, size_py)
            q += 1
            done += 1
        self.queue_offset = q
        self.enqueue_total += done
        return done

    # ------------------------------------------------------------------ take and deliver
    def take_slot(self, now: int) -> bool:
        """Take slot `read_ms` if its time has begun; False when there is none to take."""
        if not self.delivering or self.read_ms > now:
            return False
        wheel, timer_log = self.wheel, self.log
        current = now // self.precision * self.precision
        if wheel is None or timer_log is None or self.waiting <= 0:
            self.read_ms = max(self.read_ms, current)  # nothing parked: skip to now
        slot_ms = self.read_ms
        self.inflight.open(slot_ms, self.store.get_max_phy_offset())
        self.read_ms = slot_ms + self.precision
        if wheel is None or timer_log is None:
            return True
        slot = wheel.get(slot_ms)
        if slot.num == 0:
            return True
        units: list[Unit] = []
        pos = slot.last
        while pos >= 0 and len(units) < slot.num:
            unit = timer_log.read(pos)
            if unit is None:
                log.error("timer: slot %d lost its unit at %d; %d units skipped", slot_ms, pos,
                          slot.num - len(units))
                break
            units.append(unit)
            pos = unit.prev
        self.waiting = max(self.waiting - slot.num, 0)
        timers: list[tuple[Unit, MessageRecord]] = []
        for unit in reversed(units):
            record = self._record(unit.offset_py, unit.size_py)
            if record is None:
                continue
            key = delete_key(record)
            if key is not None:  # the slot's markers first
                self.deleted[key] = slot_ms
            else:
                timers.append((unit, record))
        for unit, record in timers:
            self.inflight.add(asked_time(record, self.precision), slot_ms,
                              unit.offset_py, unit.size_py, unit.write_ms, record)
        return True

    def next_wake(self) -> int:
        """When there is next something to do (a timer's time, or a slot to take)."""
        at = self.inflight.next_at()
        return self.read_ms if at is None else min(at, self.read_ms)

    def deliver(self, now: int, budget: int) -> tuple[int, bool]:
        """Deliver up to `budget` timers whose time has come.

        Returns:
            (how many were handled, whether a put failed and the rest should wait).
        """
        handled = 0
        failed = False
        while handled < budget:
            chunk = self.inflight.pop_due(now, min(PUT_BATCH, budget - handled))
            if not chunk:
                break
            retry = self._put(chunk, now)
            handled += len(chunk) - len(retry)
            if retry:
                self.inflight.push_back(retry)
                failed = True
                break
        self.inflight.close_passed(now)
        if self.deleted:
            oldest = self.commit_read_ms
            self.deleted = {k: s for k, s in self.deleted.items() if s >= oldest}
        return handled, failed

    def _put(self, chunk: list[Due], now: int) -> list[Due]:
        """Put a chunk's deliveries; returns the timers whose put must be retried."""
        ready: list[tuple[Due, BrokerMessage]] = []
        for due in chunk:
            msg = self._message(due, now)
            if msg is None:
                self.inflight.done(due)
            else:
                ready.append((due, msg))
        if not ready:
            return []
        results = self.store.append_many([msg for _, msg in ready])
        retry: list[Due] = []
        for (due, msg), result in zip(ready, results, strict=True):
            if result.status is PutMessageStatus.PUT_OK:
                self.dequeue_total += 1
                self.dequeue_by_topic[msg.topic] += 1
                self.inflight.done(due)
            elif result.status in _PERMANENT:
                log.error("timer: %s refused a due message for good (%s %s); it stays in %s",
                          msg.topic, result.status, result.error_message, TIMER_TOPIC)
                self.inflight.done(due)
            else:
                if not retry:
                    log.warning("timer: put to %s failed (%s %s); retrying", msg.topic,
                                result.status, result.error_message)
                retry.append(due)
        return retry

    def _record(self, offset_py: int, size_py: int) -> MessageRecord | None:
        data = self.store.look_message_by_offset(offset_py, size_py)
        if data is None:
            log.warning("timer: commit-log offset %d is gone; timer skipped", offset_py)
            return None
        try:
            record = decode_record(data)
        except ProtocolError as exc:
            log.error("timer: unreadable record at %d (%s); skipped", offset_py, exc)
            return None
        if record.topic != TIMER_TOPIC:  # the commit log was cut under it (HA divergence)
            log.error("timer: the record at %d is no longer a parked timer; skipped", offset_py)
            return None
        return record

    def _message(self, due: Due, now: int) -> BrokerMessage | None:
        """The delivery of one due timer, None when there is nothing to deliver."""
        record = self.inflight.records.get(due.seq) or self._record(due.offset_py,
                                                                    due.size_py)
        if record is None:
            return None
        if self.redelivery:
            ident = timer_identity(record)
            if ident is not None and self.redelivery[ident] > 0:
                self.redelivery[ident] -= 1
                if self.redelivery[ident] == 0:
                    del self.redelivery[ident]
                self.skipped_total += 1
                return None
        if self.deleted and target_key(record) in self.deleted:
            self.recalled_total += 1
            return None
        msg = delivery(record, due.enqueue_ms, now)
        if msg is None:
            log.error("timer: record at %d has no REAL_TOPIC/REAL_QID; skipped", due.offset_py)
        return msg

    # ------------------------------------------------------------------ slave
    def follow(self, cp: TimerCheckpoint) -> None:
        """Adopt the master's progress (a slave's sync): its read time, its queue offset and
        where its undelivered-for-sure region starts."""
        if cp.read_ms <= 0 or self.delivering:
            return
        if cp.read_ms > self.read_ms:
            if self.wheel is not None:
                t = self.read_ms
                while t < cp.read_ms and self.waiting > 0:
                    self.waiting -= self.wheel.get(t).num
                    t += self.precision
                self.waiting = max(self.waiting, 0)
            self.read_ms = cp.read_ms
            self.recovered_phy = cp.delivered_from_phy
        self.master_queue_offset = cp.queue_offset

    # ------------------------------------------------------------------ observability
    def enqueue_behind_messages(self) -> int:
        """timerOffsetBehind: timer-queue entries not yet in the wheel."""
        return max(self.store.get_max_offset_in_queue(TIMER_TOPIC, 0) - self.queue_offset, 0)

    def dequeue_behind_ms(self, now: int) -> int:
        """How far delivery is behind now: since the oldest undelivered timer's time, or since
        the next slot to take began (Apache's getDequeueBehindMillis)."""
        if not self.opened:
            return 0
        at = self.inflight.next_at()
        behind = now - self.read_ms if at is None else now - min(at, self.read_ms)
        return max(behind, 0)

    def enqueue_behind_ms(self, now: int) -> int:
        if now - self.last_late_ms < 2000:
            return now - self.last_late_store_ms
        return 0

    def congest_num_total(self) -> int:
        """timerCongestNum: timers waiting in the wheel or taken and not yet delivered."""
        return self.waiting + len(self.inflight)
