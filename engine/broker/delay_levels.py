"""`ScheduleMessageService`: delivers delay-level messages from SCHEDULE_TOPIC_XXXX when due.

How this works (store-format.md §9.3): queue `level - 1` of SCHEDULE_TOPIC_XXXX holds the
messages of one delay level in store order, so their delivery times (the consume-queue tags
code) only grow along the queue.  Each round walks every level from its offset: a due entry
is restored (`engine.store.delay_levels.restore`) and put into its real queue, then the level's
offset moves past it; the first entry not yet due ends the level's walk.  The service sleeps
until the earliest next delivery, at most `IDLE_S` (new delayed messages are due a whole
level's delay after they arrive, so that is soon enough).  Offsets are persisted to
delayOffset.json every `PERSIST_INTERVAL_MS` and at stop; a crash can deliver the messages of
that window again (at least once), never lose one.  Only a master delivers.

Delayed delivery has two mechanisms, each with a store part and a broker part (docs/timers.md,
"Where each part is"): delay levels (`DELAY`, 4.x), parked by `engine.store.delay_levels` and
delivered here; timer messages (`TIMER_*`, 5.x), parked by `engine.store.timer` and delivered
by `engine.broker.timer`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from engine.common.service import Service
from engine.protocol.errors import ProtocolError
from engine.protocol.message import decode_record
from engine.store.delay_levels import restore
from engine.store.message_store import MessageStore
from engine.store.record_scan import SCHEDULE_TOPIC
from engine.store.results import PutMessageStatus

log = logging.getLogger(__name__)

IDLE_S = 0.1              # 4.9.7 DELAY_FOR_A_WHILE
RETRY_AFTER_MS = 10_000   # 4.9.7 DELAY_FOR_A_PERIOD: a put failed, try the level again later
PERSIST_INTERVAL_MS = 10_000
BATCH = 512               # entries per level per round, then the event loop gets a turn
# Puts that can never succeed: log and move on rather than block the level forever.
_PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL,
                        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


class ScheduleMessageService(Service):
    name = "schedule-message"

    def __init__(self, store: MessageStore, clock: Callable[[], int],
                 is_master: Callable[[], bool]) -> None:
        super().__init__(IDLE_S)
        self.store = store
        self.clock = clock
        self.is_master = is_master
        self.delays = store.config.delay_level_table()
        self.offsets: dict[int, int] = {}
        self._retry_at: dict[int, int] = {}
        self._persisted_at = 0
        self._dirty = False

    def load(self) -> None:
        """Read delayOffset.json (levels beyond the table are dropped with a warning)."""
        table = self.store.config_files.load_delay_offsets()
        for level, offset in table.items():
            if level in self.delays:
                self.offsets[level] = offset
            else:
                log.warning("delayOffset.json has level %d, beyond messageDelayLevel's %d levels;"
                            " ignored", level, len(self.delays))

    def persist(self) -> None:
        self.store.config_files.save_delay_offsets(dict(sorted(self.offsets.items())))
        self._dirty = False

    async def run_once(self) -> None:
        now = self.clock()
        wake = now + int(IDLE_S * 1000)
        if self.is_master():
            for level in self.delays:
                next_due = self._deliver(level, now)
                if next_due is not None:
                    wake = min(wake, next_due)
                await asyncio.sleep(0)
        if self._dirty and now - self._persisted_at >= PERSIST_INTERVAL_MS:
            self._persisted_at = now
            await asyncio.to_thread(self.persist)
        self.interval = max(wake - self.clock(), 1) / 1000

    async def on_stop(self) -> None:
        if self._dirty:
            self.persist()

    def _deliver(self, level: int, now: int) -> int | None:
        """Put the due messages of one level; returns when the next one is due, if known."""
        retry_at = self._retry_at.get(level, 0)
        if retry_at > now:
            return retry_at
        queue_id = level - 1
        store = self.store
        offset = max(self.offsets.get(level, 0),
                     store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id))
        end = min(store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id), offset + BATCH)
        next_due: int | None = None
        while offset < end:
            entry = store.get_queue_entry(SCHEDULE_TOPIC, queue_id, offset)
            if entry is None:
                break
            phy, size, deliver_at = entry
            if deliver_at > now + self.delays[level]:  # written under a skewed clock
                deliver_at = now
            if deliver_at > now:
                next_due = deliver_at
                break
            if not self._put_real(level, offset, phy, size):
                self._retry_at[level] = now + RETRY_AFTER_MS
                next_due = self._retry_at[level]
                break
            offset += 1
        if offset != self.offsets.get(level):
            self.offsets[level] = offset
            self._dirty = True
        if offset < store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id) and next_due is None:
            next_due = now  # more than one batch was due: come straight back
        return next_due

    def _put_real(self, level: int, offset: int, phy: int, size: int) -> bool:
        """Deliver one parked message; False when it should be retried later."""
        data = self.store.look_message_by_offset(phy, size)
        if data is None:  # its commit-log file expired: nothing left to deliver
            log.warning("delay level %d offset %d: commit-log offset %d is gone, skipped",
                        level, offset, phy)
            return True
        try:
            msg = restore(decode_record(data))
        except ProtocolError as exc:
            log.error("delay level %d offset %d: unreadable record at %d (%s), skipped",
                      level, offset, phy, exc)
            return True
        if msg is None:
            log.error("delay level %d offset %d: record at %d has no REAL_TOPIC/REAL_QID, skipped",
                      level, offset, phy)
            return True
        result = self.store.append_due(msg)
        if result.status is PutMessageStatus.PUT_OK:
            return True
        if result.status in _PERMANENT:
            log.error("delay level %d offset %d: %s refused the message at %d for good (%s %s); "
                      "it stays in %s for inspection", level, offset, msg.topic, phy,
                      result.status, result.error_message, SCHEDULE_TOPIC)
            return True
        log.warning("delay level %d offset %d: put to %s failed (%s %s), retrying in %d s",
                    level, offset, msg.topic, result.status, result.error_message,
                    RETRY_AFTER_MS // 1000)
        return False
