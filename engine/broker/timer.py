"""Timer messages, broker part: `TimerService`, the asyncio task that takes, enqueues, delivers.

How this works (docs/timers.md): each round, on a master, takes the slots whose time has
begun, enqueues the timer topic's new entries into the wheel (woken by their arrival), and
delivers the timers whose time has come, in chunks so the event loop keeps serving sends.
It sleeps until the next timer or slot is due (at most `IDLE_S`).  Every
`timerFlushIntervalMs` it snapshots the progress and flushes the timer log, the wheel and
the checkpoint in a worker thread.  A slave enqueues (its files stay ready) but never
delivers; when it becomes master, `TimerMessageStore.take_over` runs first.

The store part is `engine.store.timer`.  Timer messages are one of delayed delivery's two
mechanisms; delay levels (`DELAY`, 4.x) are the other: `engine.store.delay_levels` and
`engine.broker.delay_levels` (docs/timers.md, "Where each part is").
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from engine.common.service import Service
from engine.store.message_store import MessageStore
from engine.store.record_scan import TIMER_TOPIC

log = logging.getLogger(__name__)

IDLE_S = 0.1
MIN_SLEEP_MS = 5         # timers due within this are delivered together: fewer wake-ups
ENQUEUE_BATCH = 4096     # entries per round before the event loop gets a turn
TAKE_BATCH = 64          # slots taken per round (catching up after a pause)
DELIVER_BATCH = 1024     # deliveries per round before the event loop gets a turn
RETRY_AFTER_MS = 1000    # a put failed (store busy, role switch): try again after this


class TimerService(Service):
    name = "timer-message"

    def __init__(self, store: MessageStore, clock: Callable[[], int],
                 is_master: Callable[[], bool]) -> None:
        super().__init__(IDLE_S)
        self.timers = store.timer
        self.clock = clock
        self.is_master = is_master
        self._was_master = False
        self._flushed_at = 0
        self._flushing: asyncio.Future[None] | None = None
        self._retry_at = 0
        #: (ms, enqueued, delivered) about once a second, for the runtime info's rates
        self._samples: deque[tuple[int, int, int]] = deque(maxlen=11)
        store.add_arrival_listener(self._arrived)

    def tps(self) -> tuple[float, float]:
        """Enqueue and delivery rates over the last ~10 s (timerEnqueueTps/timerDequeueTps)."""
        if len(self._samples) < 2:
            return 0.0, 0.0
        (t0, e0, d0), (t1, e1, d1) = self._samples[0], self._samples[-1]
        seconds = max(t1 - t0, 1) / 1000
        return (e1 - e0) / seconds, (d1 - d0) / seconds

    def _sample(self, now: int) -> None:
        if not self._samples or now - self._samples[-1][0] >= 1000:
            t = self.timers
            self._samples.append((now, t.enqueue_total, t.dequeue_total))

    def _arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self.wakeup()

    async def run_once(self) -> None:
        timers = self.timers
        master = self.is_master()
        if master and not self._was_master:
            timers.take_over()
        elif self._was_master and not master:
            timers.step_down()
        self._was_master = master
        now = self.clock()
        taken = 0
        while taken < TAKE_BATCH and timers.take_slot(now):
            taken += 1
        busy = taken >= TAKE_BATCH
        busy = timers.enqueue(ENQUEUE_BATCH) >= ENQUEUE_BATCH or busy
        if master and now >= self._retry_at:
            handled, failed = timers.deliver(now, DELIVER_BATCH)
            if failed:
                self._retry_at = now + RETRY_AFTER_MS
            busy = busy or handled >= DELIVER_BATCH
        self._maybe_flush(now)
        self._sample(now)
        if busy:
            self.interval = 0.0
            return
        wake = timers.next_wake() if master else now + int(IDLE_S * 1000)
        self.interval = min(max(wake - self.clock(), MIN_SLEEP_MS) / 1000, IDLE_S)

    def _maybe_flush(self, now: int) -> None:
        timers = self.timers
        if not timers.opened or (self._flushing is not None and not self._flushing.done()):
            return
        if now - self._flushed_at < timers.config.timer_flush_interval_ms:
            return
        self._flushed_at = now
        if timers.log is not None and timers.written is not None:
            # only what the last written checkpoint says is delivered: a restart from it
            # walks slots from its read time on
            timers.log.delete_delivered(timers.written.read_ms, timers.precision)
        cp = timers.snapshot()
        self._flushing = asyncio.ensure_future(asyncio.to_thread(timers.flush_files, cp))

    async def on_stop(self) -> None:
        if self._flushing is not None:
            await self._flushing  # the store's close writes the final checkpoint
