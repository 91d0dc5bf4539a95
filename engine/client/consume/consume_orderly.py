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
With the `dedupe` option, the keys of each pull's messages are claimed as they are cached
and the listener gets a turn's NEW messages; its outcome is recorded before the queue's
offset moves past them (`dedupe_ahead.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import time
from typing import Any

from engine.client.consume import consume_direct, dedupe
from engine.client.consume.consumer_options import OrderlyListener
from engine.client.consume.dedupe_ahead import QueueKeys
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

    def __init__(self, consumer: PushHost, listener: OrderlyListener,
                 guard: dedupe.Guard | None = None) -> None:
        self.consumer = consumer
        self.listener = listener
        self.guard = guard  # with one, keys are claimed ahead (dedupe_ahead.QueueKeys)
        self.clustering = consumer.options.message_model is MessageModel.CLUSTERING
        self.lock_service = Periodic("lock-queues", LOCK_INTERVAL, consumer.lock_all,
                                     first_delay=1.0)
        self._keys: dict[ProcessQueue, QueueKeys] = {}
        if guard is not None:
            guard.prune = self._prune

    def start(self) -> None:
        if self.clustering:
            self.lock_service.start()

    async def shutdown(self) -> None:
        if self.lock_service.running:
            await self.lock_service.stop()
        for keys in self._keys.values():
            keys.drop()
        self._keys.clear()

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        if self.guard is not None and not pq.dropped:
            self._queue_keys(self.guard, pq, mq).pulled(msgs)
        if dispatch:
            self.consumer.spawn(self.consume(pq, mq), work=True)

    def dropped(self, pq: ProcessQueue) -> None:
        """A queue left this consumer: release the keys claimed for its cached messages."""
        keys = self._keys.pop(pq, None)
        if keys is not None:
            keys.drop()

    def _prune(self) -> None:
        for pq in [pq for pq in self._keys if pq.dropped]:
            self.dropped(pq)

    def _queue_keys(self, guard: dedupe.Guard, pq: ProcessQueue, mq: MessageQueue
                    ) -> QueueKeys:
        keys = self._keys.get(pq)
        if keys is None:
            keys = self._keys[pq] = QueueKeys(
                guard, pq, functools.partial(self._update_offset, pq, mq),
                functools.partial(self._record_failed, pq, mq))
        return keys

    def _update_offset(self, pq: ProcessQueue, mq: MessageQueue, offset: int) -> None:
        if not pq.dropped:
            self.consumer.offset_store.update(mq, offset, False)

    def _record_failed(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """Recording an outcome failed: pull the queue again from its recorded offset."""
        async def drop() -> None:
            c = self.consumer
            if c.rebalancer.table.get(mq) is pq:
                await c.remove_process_queue(mq)
                c.instance.rebalance_now()

        self.consumer.spawn(drop())

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
                keys = None if self.guard is None else self._queue_keys(self.guard, pq, mq)
                if keys is None:
                    status = await self._call(msgs, ctx, mq)
                else:
                    status = await self._call_keyed(keys, msgs, ctx, mq)
                if pq.dropped:
                    if keys is not None:  # the listener's effect counts, the offset not
                        keys.finished(msgs, _succeeded(status), False)
                    return
                if not await self._result(msgs, status, ctx, pq, mq, keys):
                    return

    async def _call_keyed(self, keys: QueueKeys, msgs: list[MessageExt],
                          ctx: ConsumeOrderlyContext, mq: MessageQueue) -> Any:
        """The listener on the NEW and keyless messages of `msgs`: SUCCESS without it when
        every key was consumed already, SUSPEND when one is busy elsewhere."""
        try:
            run, busy = await keys.turn(msgs)
        except Exception:
            log.exception("%s: claiming keys on %s failed", self.consumer.group, mq)
            return SUSPEND
        if busy:
            return SUSPEND
        if not run:
            return ConsumeOrderlyStatus.SUCCESS
        return await self._call(run, ctx, mq)

    async def _call(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext,
                    mq: MessageQueue) -> Any:
        try:
            outcome = self.listener(msgs, ctx)
            return await outcome if inspect.isawaitable(outcome) else outcome
        except Exception:
            log.exception("%s: orderly listener raised on %s", self.consumer.group, mq)
            return SUSPEND

    async def _result(self, msgs: list[MessageExt], status: Any, ctx: ConsumeOrderlyContext,
                      pq: ProcessQueue, mq: MessageQueue, keys: QueueKeys | None) -> bool:
        """`processConsumeResult` (autoCommit): True to keep consuming this queue.  With
        `keys`, the outcome is recorded and the offset moves once the record is durable."""
        c = self.consumer
        offset = -1
        keep_going = True
        record = None
        if _succeeded(status):
            offset = pq.commit()
            if keys is not None:
                record = keys.finished(msgs, True, False)
        else:
            again, suspend = await self._check_reconsume_times(msgs)
            if keys is not None:
                keys.finished(msgs, False, suspend)
            if suspend:
                pq.make_consume_again(again)
                wait = ctx.suspend_current_queue_time_millis
                self._later(pq, mq, wait if wait != -1
                            else c.options.suspend_current_queue_time_millis)
                keep_going = False
            else:
                offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            if keys is None:
                c.offset_store.update(mq, offset, False)
            else:
                keys.commit(offset, record)
        return keep_going

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
        ctx = ConsumeOrderlyContext(MessageQueue(msg.topic, broker_name or "", msg.queue_id))
        listener = (self.listener if self.guard is None
                    else dedupe.orderly(self.listener, self.guard))
        return await consume_direct.consume_directly(self.orderly, DIRECT_RESULTS,
                                                     lambda: listener([msg], ctx))


def _succeeded(status: Any) -> bool:
    return isinstance(status, ConsumeOrderlyStatus) and status is not SUSPEND
