"""Orderly consumption: one queue at a time, in offset order, only while its lock is held.

How this works (client-behaviour.md §8.2): a queue whose cache gains messages while idle gets
one consume task; the queue's `consume_lock` keeps a second from running beside it.  The task
takes `consume_message_batch_max_size` messages at a time from the front of the cache and
calls the listener, as long as (clustering) the broker lock is held and younger than 30 s,
for at most 60 s in a row.  SUCCESS commits the taken messages (the queue's offset moves past
them); SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception) puts them back with one more
reconsume time and retries them after `suspend_current_queue_time_millis` (10 ms..30 s) -
unless a message has reached the max reconsume times, in which case it is resent to
``%RETRY%<group>`` so the broker buries it in the DLQ, and the consumer moves on.  A queue
without a valid lock is re-locked 100 ms (or 10 ms) later and retried 10 ms after a success,
3 s after a failure.  In clustering mode every held queue is re-locked every 20 s.
The `dedupe` option is a subclass of this service (`dedupe_services.py`) that overrides the
steps around the listener call (`pulled`, `call`, `moved`, `suspended`, `abandoned`,
`dropped`); nothing here knows of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from typing import Any

from engine.client.consume import consume_direct
from engine.client.consume.consumer_options import OrderlyListener
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.push_host import PushHost
from engine.client.consume.send_back import resend_to_retry
from engine.client.core.message import PROPERTY_RECONSUME_TIME, MessageExt
from engine.client.core.results import ConsumeOrderlyContext, ConsumeOrderlyStatus
from engine.client.core.timers import Periodic
from engine.protocol.body.admin import CMResult, ConsumeMessageDirectlyResult
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.message_queue import MessageQueue

log = logging.getLogger(__name__)

MAX_TIME_CONSUME_CONTINUOUSLY = 60.0
LOCK_INTERVAL = 20.0
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
DIRECT_RESULTS = {ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
                  ConsumeOrderlyStatus.COMMIT: CMResult.CR_COMMIT,
                  ConsumeOrderlyStatus.ROLLBACK: CMResult.CR_ROLLBACK,
                  SUSPEND: CMResult.CR_LATER}


class ConsumeOrderlyService:
    orderly = True

    def __init__(self, consumer: PushHost, listener: OrderlyListener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.clustering = consumer.options.message_model is MessageModel.CLUSTERING
        self.lock_service = Periodic("lock-queues", LOCK_INTERVAL, consumer.lock_all,
                                     first_delay=1.0)

    def start(self) -> None:
        if self.clustering:
            self.lock_service.start()

    async def shutdown(self) -> None:
        if self.lock_service.running:
            await self.lock_service.stop()

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        if not pq.dropped:
            self.pulled(msgs, pq, mq)
        if dispatch:
            self.consumer.spawn(self.consume(pq, mq), work=True)

    # ------------------------------------------------------------------ steps a subclass
    # (dedupe_services.DedupeOrderlyService) extends

    def pulled(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """A pull cached `msgs` in a queue this service consumes."""

    def dropped(self, pq: ProcessQueue) -> None:
        """A queue left this consumer."""

    async def call(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext,
                   pq: ProcessQueue, mq: MessageQueue) -> Any:
        """The listener's outcome on `msgs` (SUSPEND when it raised)."""
        try:
            outcome = self.listener(msgs, ctx)
            return await outcome if inspect.isawaitable(outcome) else outcome
        except Exception:
            log.exception("%s: orderly listener raised on %s", self.consumer.group, mq)
            return SUSPEND

    def moved(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
              consumed: bool, offset: int) -> None:
        """The queue moved past `msgs` (`consumed`, or resent to the retry topic after their
        last reconsume): its offset is now `offset` (-1: unchanged)."""
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update(mq, offset, False)

    def suspended(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """`msgs` failed and will be consumed again."""

    def abandoned(self, msgs: list[MessageExt], status: Any, pq: ProcessQueue,
                  mq: MessageQueue) -> None:
        """The queue was dropped while the listener ran on `msgs` (`status` its outcome)."""

    # ------------------------------------------------------------------ the queue's task

    def _later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        delay = min(max(delay_ms, 10), 30_000) / 1000

        async def again() -> None:
            await asyncio.sleep(delay)
            self.consumer.spawn(self.consume(pq, mq), work=True)

        self.consumer.spawn(again())

    def _lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        async def relock() -> None:
            await asyncio.sleep(delay_ms / 1000)
            locked = not self.consumer.stopping and await self.consumer.lock_one(mq)
            if not self.consumer.stopping:
                self._later(pq, mq, 10 if locked else 3000)

        self.consumer.spawn(relock())

    def _lock_valid(self, pq: ProcessQueue) -> bool:
        return not self.clustering or (pq.locked and not pq.lock_expired())

    async def consume(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """`ConsumeRequest.run` of the orderly service."""
        if pq.dropped:
            return
        async with pq.consume_lock:
            if not self._lock_valid(pq):
                self._lock_later(pq, mq, 100)
                return
            begin = time.monotonic()
            batch = max(self.consumer.options.consume_message_batch_max_size, 1)
            while not pq.dropped and not self.consumer.stopping:
                if not self._lock_valid(pq):
                    self._lock_later(pq, mq, 10)
                    return
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self._later(pq, mq, 10)
                    return
                msgs = pq.take(batch)
                if not msgs:
                    return
                ctx = ConsumeOrderlyContext(mq)
                status = await self.call(msgs, ctx, pq, mq)
                if pq.dropped:
                    self.abandoned(msgs, status, pq, mq)
                    return
                if not await self._result(msgs, status, ctx, pq, mq):
                    return

    async def _result(self, msgs: list[MessageExt], status: Any, ctx: ConsumeOrderlyContext,
                      pq: ProcessQueue, mq: MessageQueue) -> bool:
        """`processConsumeResult` (autoCommit): True to keep consuming this queue."""
        if succeeded(status):
            self.moved(msgs, pq, mq, True, pq.commit())
            return True
        again, suspend = await self._check_reconsume_times(msgs)
        if not suspend:
            self.moved(msgs, pq, mq, False, pq.commit())
            return True
        self.suspended(msgs, pq, mq)
        pq.make_consume_again(again)
        wait = ctx.suspend_current_queue_time_millis
        self._later(pq, mq, wait if wait != -1
                    else self.consumer.options.suspend_current_queue_time_millis)
        return False

    async def _check_reconsume_times(self, msgs: list[MessageExt]
                                     ) -> tuple[list[MessageExt], bool]:
        """(messages to consume again, whether to suspend the queue)."""
        c = self.consumer
        max_times = c.options.max_reconsume(True)
        out: list[MessageExt] = []
        suspend = False
        for m in msgs:
            if m.reconsume_times >= max_times:
                m.properties[PROPERTY_RECONSUME_TIME] = str(m.reconsume_times)
                if await resend_to_retry(c.instance, c.group, m,
                                         reconsume_time=m.reconsume_times,
                                         max_reconsume=max_times):
                    out.append(m)
                    continue
            suspend = True
            out.append(dataclasses.replace(m, reconsume_times=m.reconsume_times + 1))
        return out, suspend

    async def consume_directly(self, msg: MessageExt, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        return await self.consume_directly_with(self.listener, msg, broker_name)

    async def consume_directly_with(self, listener: OrderlyListener, msg: MessageExt,
                                    broker_name: str | None) -> ConsumeMessageDirectlyResult:
        ctx = ConsumeOrderlyContext(MessageQueue(msg.topic, broker_name or "", msg.queue_id))
        return await consume_direct.consume_directly(self.orderly, DIRECT_RESULTS,
                                                     lambda: listener([msg], ctx))


def succeeded(status: Any) -> bool:
    """Whether an orderly listener's outcome lets the queue move on."""
    return isinstance(status, ConsumeOrderlyStatus) and status is not SUSPEND
