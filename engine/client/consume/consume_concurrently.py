"""Concurrent consumption: listener calls in batches, send-back of failures, offset updates.

How this works (client-behaviour.md §8.1): pulled messages are handed to the listener in
batches of `consume_message_batch_max_size`.  A plain-function listener is called from the
event loop right away; a coroutine listener runs as a task, at most `consume_thread_max` at
once.  CONSUME_SUCCESS acknowledges the batch up to `context.ack_index`; RECONSUME_LATER (or
an exception, or None) fails all of it.  In clustering mode each failed message goes back
(`send_back.py`, delay level `context.delay_level_when_next_consume`); a message that cannot
be sent back at all is consumed again locally after 5 s.  Broadcasting failures are only
logged.  Then the batch leaves the process queue and the queue's offset moves to the
smallest offset still cached.  Every `consume_timeout` minutes, messages whose listener has
run longer than that are sent back with delay level 3 and dropped from the cache.  The
`dedupe` option is a subclass of this service (`dedupe_services.py`), built on `call` and
`await_outcome`; nothing here knows of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from engine.client.consume import consume_direct
from engine.client.consume.consumer_options import ConcurrentListener
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.push_host import PushHost
from engine.client.consume.send_back import send_message_back
from engine.client.core.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.core.timers import Periodic
from engine.protocol.body.admin import CMResult, ConsumeMessageDirectlyResult
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.message_queue import MessageQueue

log = logging.getLogger(__name__)

RECONSUME_LOCALLY_AFTER = 5.0
EXPIRED_PER_ROUND = 16
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
DIRECT_RESULTS = {SUCCESS: CMResult.CR_SUCCESS, LATER: CMResult.CR_LATER}


class ConsumeConcurrentlyService:
    orderly = False

    def __init__(self, consumer: PushHost, listener: ConcurrentListener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.slots = asyncio.Semaphore(consumer.options.consume_thread_max)
        self.expiry = Periodic("clean-expired-messages", consumer.options.consume_timeout * 60,
                               self.clean_expired)

    def start(self) -> None:
        self.expiry.start()

    async def shutdown(self) -> None:
        await self.expiry.stop()

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        for batch in self.requests(msgs):
            self.run(batch, pq, mq)

    def requests(self, msgs: list[MessageExt]) -> list[list[MessageExt]]:
        """A pull's messages cut into consume requests of the configured batch size."""
        size = max(self.consumer.options.consume_message_batch_max_size, 1)
        return [msgs[i:i + size] for i in range(0, len(msgs), size)]

    def run(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """One consume request (`ConsumeRequest.run`)."""
        ctx = ConsumeConcurrentlyContext(mq)
        if pq.dropped:
            return
        mark_start(msgs)
        outcome = self.call(msgs, ctx, mq)
        if pending(outcome):
            self.await_outcome(outcome, msgs, mq, functools.partial(
                self._acknowledge_awaited, msgs, pq, mq, ctx))
        else:
            self.acknowledge(outcome, msgs, pq, mq, ctx)

    def call(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext,
             mq: MessageQueue) -> Any:
        """The listener's outcome on `msgs`: a status, None, or an awaitable (`pending`); a
        listener that raised is RECONSUME_LATER."""
        try:
            return self.listener(msgs, ctx)
        except Exception:
            log.exception("%s: listener raised on %d messages of %s", self.consumer.group,
                          len(msgs), mq)
            return LATER

    def await_outcome(self, outcome: Any, msgs: list[MessageExt], mq: MessageQueue,
                      then: Callable[[Any], None]) -> None:
        """Await a coroutine listener's `outcome` in a consume slot, then hand its status
        (RECONSUME_LATER when it raised) to `then`."""
        task = self.consumer.spawn(self._await(outcome, msgs, mq, then), work=True)
        if inspect.iscoroutine(outcome):  # cancelled at shutdown before it ran: close it
            task.add_done_callback(functools.partial(_close, outcome))

    async def _await(self, outcome: Any, msgs: list[MessageExt], mq: MessageQueue,
                     then: Callable[[Any], None]) -> None:
        async with self.slots:
            try:
                status = await outcome
            except Exception:
                log.exception("%s: listener raised on %d messages of %s",
                              self.consumer.group, len(msgs), mq)
                status = LATER
        then(status)

    def _acknowledge_awaited(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                             ctx: ConsumeConcurrentlyContext, status: Any) -> None:
        self.acknowledge(status, msgs, pq, mq, ctx)

    def acknowledge(self, status: Any, msgs: list[MessageExt], pq: ProcessQueue,
                    mq: MessageQueue, ctx: ConsumeConcurrentlyContext) -> None:
        """`processConsumeResult`."""
        if pq.dropped:
            log.info("%s: %s dropped; result of %d messages ignored", self.consumer.group,
                     mq, len(msgs))
            return
        ack = min(ctx.ack_index, len(msgs) - 1) if status is SUCCESS else -1
        failed = msgs[ack + 1:]
        if failed and self.consumer.options.message_model is MessageModel.CLUSTERING:
            self.consumer.spawn(self._send_back(failed, msgs, pq, mq,
                                                ctx.delay_level_when_next_consume), work=True)
            return
        for m in failed:
            log.warning("%s: broadcast message %s failed; not retried", self.consumer.group,
                        m.msg_id)
        self._done(msgs, pq, mq)

    def _done(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        offset = pq.remove(msgs)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update(mq, offset, True)

    async def _send_back(self, failed: list[MessageExt], msgs: list[MessageExt],
                         pq: ProcessQueue, mq: MessageQueue, delay_level: int) -> None:
        c = self.consumer
        max_reconsume = c.options.max_reconsume(False)
        stuck: list[MessageExt] = []
        for m in failed:
            if not await send_message_back(c.instance, c.group, m, delay_level, max_reconsume):
                stuck.append(m)
        if stuck:
            keep = {m.queue_offset for m in stuck}
            msgs = [m for m in msgs if m.queue_offset not in keep]
            c.spawn(self._later([_again(m) for m in stuck], pq, mq))
        self._done(msgs, pq, mq)

    async def _later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        await asyncio.sleep(RECONSUME_LOCALLY_AFTER)
        self.submit(msgs, pq, mq, True)

    async def clean_expired(self) -> None:
        """`cleanExpireMsg`: send back messages stuck in a listener for `consume_timeout`."""
        c = self.consumer
        limit_ms = c.options.consume_timeout * 60_000
        now = int(time.time() * 1000)
        for mq, pq in list(c.rebalancer.table.items()):
            for m in sorted(pq.msgs.values(), key=lambda m: m.queue_offset)[:EXPIRED_PER_ROUND]:
                started = m.properties.get(PROPERTY_CONSUME_START_TIMESTAMP, "")
                if not started.isdigit() or now - int(started) <= limit_ms:
                    break
                log.warning("%s: %s consumed for over %d min; sent back", c.group, m.msg_id,
                            c.options.consume_timeout)
                if await send_message_back(c.instance, c.group, m, 3,
                                           c.options.max_reconsume(False)):
                    self._done([m], pq, mq)

    async def consume_directly(self, msg: MessageExt, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        return await self.consume_directly_with(self.listener, msg, broker_name)

    async def consume_directly_with(self, listener: ConcurrentListener, msg: MessageExt,
                                    broker_name: str | None) -> ConsumeMessageDirectlyResult:
        ctx = ConsumeConcurrentlyContext(MessageQueue(msg.topic, broker_name or "",
                                                      msg.queue_id))
        return await consume_direct.consume_directly(self.orderly, DIRECT_RESULTS,
                                                     lambda: listener([msg], ctx))


def pending(outcome: Any) -> bool:
    """Whether a listener's outcome is still to be awaited (a coroutine listener's)."""
    return (outcome is not None and not isinstance(outcome, ConsumeConcurrentlyStatus)
            and inspect.isawaitable(outcome))


def mark_start(msgs: list[MessageExt]) -> None:
    """Stamp CONSUME_START_TIME on messages handed to the listener (`clean_expired`)."""
    start = str(int(time.time() * 1000))
    for m in msgs:
        m.properties[PROPERTY_CONSUME_START_TIMESTAMP] = start


def _close(coro: Coroutine[Any, Any, Any], _: object) -> None:
    """Close a listener coroutine (a no-op once it ran): one whose task was cancelled while
    waiting for a consume slot would otherwise never be awaited."""
    coro.close()


def _again(m: MessageExt) -> MessageExt:
    return dataclasses.replace(m, reconsume_times=m.reconsume_times + 1)
