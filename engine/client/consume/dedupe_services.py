"""The push consume services under `Dedupe`: each business key consumed once, batched.

How this works: `PushConsumer` builds one of these instead of the plain service when its
options carry `dedupe`; the plain services never see a key.

- `DedupeConcurrentlyService`: the keys of one pull's requests are claimed in one store
  operation (`dedupe.claim_turns`); each request then takes the plain service's path
  (`call`, `await_outcome`) with its NEW messages, or is acknowledged without the listener
  (every key consumed already: CONSUME_SUCCESS; one busy elsewhere: RECONSUME_LATER).  The
  listener's outcome is recorded (`dedupe.Turn.record`) and the request acknowledged only
  once that record is durable; the requests finished at one moment share one record.
- `DedupeOrderlyService`: each queue's cached messages are claimed ahead of their turn and
  the queue's offset moves past a message only behind its record (`dedupe_ahead.QueueKeys`).

CONSUME_MESSAGE_DIRECTLY claims and records around its one call (`dedupe.concurrently`,
`dedupe.orderly`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from engine.client.consume import dedupe
from engine.client.consume.consume_concurrently import (
    LATER,
    ConsumeConcurrentlyService,
    mark_start,
    pending,
)
from engine.client.consume.consume_orderly import SUSPEND, ConsumeOrderlyService, succeeded
from engine.client.consume.consumer_options import ConcurrentListener, OrderlyListener
from engine.client.consume.dedupe_ahead import QueueKeys
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.push_host import PushHost
from engine.client.core.message import MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.protocol.body.admin import ConsumeMessageDirectlyResult
from engine.protocol.body.message_queue import MessageQueue

log = logging.getLogger(__name__)

_Ack = tuple[Any, list[MessageExt], ProcessQueue, MessageQueue, ConsumeConcurrentlyContext]


class DedupeConcurrentlyService(ConsumeConcurrentlyService):
    def __init__(self, consumer: PushHost, listener: ConcurrentListener,
                 guard: dedupe.Guard) -> None:
        super().__init__(consumer, listener)
        self.guard = guard
        self._recording: dict[asyncio.Future[None], list[_Ack]] = {}  # record -> its requests

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        self.consumer.spawn(self._claim(self.requests(msgs), pq, mq), work=True)

    async def _claim(self, batches: list[list[MessageExt]], pq: ProcessQueue,
                     mq: MessageQueue) -> None:
        """The keys of one pull's requests claimed together, then each request run with its
        NEW messages, or acknowledged without the listener."""
        if pq.dropped:
            return
        mark_start([m for msgs in batches for m in msgs])
        try:
            turns = await dedupe.claim_turns(self.guard, batches)
        except Exception:
            log.exception("%s: claiming the keys of %d messages of %s failed",
                          self.consumer.group, sum(map(len, batches)), mq)
            for msgs in batches:
                self.acknowledge(LATER, msgs, pq, mq, ConsumeConcurrentlyContext(mq))
            return
        for turn in turns:
            if turn.status is None:
                self._run_turn(turn, pq, mq)
            else:
                self.acknowledge(turn.status, turn.msgs, pq, mq, ConsumeConcurrentlyContext(mq))

    def _run_turn(self, turn: dedupe.Turn, pq: ProcessQueue, mq: MessageQueue) -> None:
        """One consume request whose listener sees the turn's NEW messages."""
        ctx = ConsumeConcurrentlyContext(mq)
        if pq.dropped:
            turn.record(None, ctx, ctx)  # never ran: its keys are released
            return
        inner = turn.context(ctx)
        outcome = self.call(turn.listener_msgs(), inner, mq)
        if pending(outcome):
            turn.hold()  # its leases renewed while it waits for a slot and runs
            self.await_outcome(outcome, turn.msgs, mq,
                               functools.partial(self._finish, turn, pq, mq, ctx, inner))
        else:
            self._finish(turn, pq, mq, ctx, inner, outcome)

    def _finish(self, turn: dedupe.Turn, pq: ProcessQueue, mq: MessageQueue,
                ctx: ConsumeConcurrentlyContext, inner: ConsumeConcurrentlyContext,
                status: Any) -> None:
        """The listener's outcome recorded first, the request acknowledged once the record
        is durable (at once when there is nothing to record)."""
        record = turn.record(status, ctx, inner)
        if record is None:
            self.acknowledge(status, turn.msgs, pq, mq, ctx)
            return
        waiting = self._recording.get(record)  # shared by the requests finished now
        if waiting is None:
            waiting = self._recording[record] = []
            record.add_done_callback(self._recorded)
        waiting.append((status, turn.msgs, pq, mq, ctx))

    def _recorded(self, record: asyncio.Future[None]) -> None:
        """Acknowledge the requests of a CONSUMED record once it is durable; if it failed,
        they are retried instead."""
        failed = record.cancelled() or record.exception() is not None
        for status, msgs, pq, mq, ctx in self._recording.pop(record, ()):
            if failed:
                log.error("%s: recording the keys of %d messages of %s failed; retried",
                          self.consumer.group, len(msgs), mq)
                status = LATER
            self.acknowledge(status, msgs, pq, mq, ctx)

    async def consume_directly(self, msg: MessageExt, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        return await self.consume_directly_with(dedupe.concurrently(self.listener, self.guard),
                                                msg, broker_name)


class DedupeOrderlyService(ConsumeOrderlyService):
    def __init__(self, consumer: PushHost, listener: OrderlyListener,
                 guard: dedupe.Guard) -> None:
        super().__init__(consumer, listener)
        self.guard = guard
        self._keys: dict[ProcessQueue, QueueKeys] = {}
        #: the keys of each queue's call in progress, kept for its outcome even when the
        #: queue is dropped meanwhile (one call at a time per queue: its consume lock)
        self._calling: dict[ProcessQueue, QueueKeys] = {}
        guard.prune = self._prune

    async def shutdown(self) -> None:
        await super().shutdown()
        for keys in self._keys.values():
            keys.drop()
        self._keys.clear()
        self._calling.clear()

    def pulled(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        self._queue_keys(pq, mq).pulled(msgs)

    def dropped(self, pq: ProcessQueue) -> None:
        """Release the keys claimed for the queue's cached messages."""
        keys = self._keys.pop(pq, None)
        if keys is not None:
            keys.drop()

    async def call(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext,
                   pq: ProcessQueue, mq: MessageQueue) -> Any:
        """The listener on the NEW and keyless messages of `msgs`: SUCCESS without it when
        every key was consumed already, SUSPEND when one is busy elsewhere."""
        keys = self._calling[pq] = self._queue_keys(pq, mq)
        try:
            run, busy = await keys.turn(msgs)
        except Exception:
            log.exception("%s: claiming keys on %s failed", self.consumer.group, mq)
            return SUSPEND
        if busy:
            return SUSPEND
        if not run:
            return ConsumeOrderlyStatus.SUCCESS
        return await super().call(run, ctx, pq, mq)

    def moved(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
              consumed: bool, offset: int) -> None:
        """The keys recorded CONSUMED (or released); the offset moves behind the record."""
        keys = self._calling.pop(pq)
        record = keys.finished(msgs, consumed, False)
        if offset >= 0 and not pq.dropped:
            keys.commit(offset, record)

    def suspended(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        self._calling.pop(pq).finished(msgs, False, True)  # kept for the next try

    def abandoned(self, msgs: list[MessageExt], status: Any, pq: ProcessQueue,
                  mq: MessageQueue) -> None:
        """The listener's effect counts, the offset not."""
        self._calling.pop(pq).finished(msgs, succeeded(status), False)

    async def consume_directly(self, msg: MessageExt, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        return await self.consume_directly_with(dedupe.orderly(self.listener, self.guard),
                                                msg, broker_name)

    def _prune(self) -> None:
        for pq in [pq for pq in self._keys if pq.dropped]:
            self.dropped(pq)

    def _queue_keys(self, pq: ProcessQueue, mq: MessageQueue) -> QueueKeys:
        keys = self._keys.get(pq)
        if keys is None:
            keys = self._keys[pq] = QueueKeys(
                self.guard, pq, functools.partial(self._update_offset, pq, mq),
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
