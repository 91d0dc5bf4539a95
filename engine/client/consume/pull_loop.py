"""`PullLoop`: one held queue's long-polling pulls for a push consumer (client-behaviour §4).

How this works: one task per process queue repeats `once()`, which answers how long to wait
before the next pull.  It backs off 50 ms while the queue's cache is over its message-count
or size threshold (or, consuming concurrently, spans more than `consume_concurrently_max_span`
offsets), and 1 s while an orderly queue is not locked; the first pull after an orderly lock
re-reads the start offset.  A pull asks the broker to hold it up to 15 s (RPC timeout 30 s)
and carries the in-memory offset as its commit offset (clustering, not to a slave).  FOUND
caches and dispatches the messages and pulls again at once; NO_NEW_MSG / NO_MATCHED_MSG move
to the broker's next offset (and commit it when nothing is cached); OFFSET_ILLEGAL drops the
queue and, 10 s later, stores the broker's offset and removes the queue so a later rebalance
starts it again.  Failures retry after 1 s, FLOW_CONTROL after 20 ms.
"""

from __future__ import annotations

import asyncio
import logging

from engine.client.consume.consume_from import OffsetUnknownError
from engine.client.consume.process_queue import ProcessQueue, now_ms
from engine.client.consume.push_host import PushHost
from engine.client.core.errors import ClientError, ServerError
from engine.client.core.pull_codec import pull_request, pull_sys_flag
from engine.client.core.results import PullStatus
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import ResponseCode

log = logging.getLogger(__name__)

FLOW_CONTROL_DELAY = 0.05
BROKER_FLOW_CONTROL_DELAY = 0.02
OFFSET_MOVED_DELAY = 10.0
MIB = 1024 * 1024


class PullLoop:
    def __init__(self, consumer: PushHost, mq: MessageQueue, pq: ProcessQueue,
                 offset: int) -> None:
        self.consumer = consumer
        self.mq = mq
        self.pq = pq
        self.next_offset = offset
        self.previously_locked = False
        self.broker_id = 0  # the broker's suggestion for the next pull (ha.md §5)

    async def run(self) -> None:
        while not (self.pq.dropped or self.consumer.stopping):
            delay = await self.once()
            if delay > 0:
                await asyncio.sleep(delay)

    def _flow_controlled(self) -> bool:
        c, pq = self.consumer, self.pq
        count_limit, size_limit = c.thresholds(self.mq.topic)
        if pq.msg_count > count_limit or pq.msg_size > size_limit * MIB:
            return True
        return (not c.orderly
                and pq.max_span() > c.options.consume_concurrently_max_span)

    async def once(self) -> float:
        """One pull (or a reason not to pull); returns seconds to wait before the next."""
        c, pq, mq = self.consumer, self.pq, self.mq
        o = c.options
        error_delay = o.pull_time_delay_millis_when_exception / 1000
        pq.last_pull_ms = now_ms()
        if c.paused:
            return error_delay
        if self._flow_controlled():
            return FLOW_CONTROL_DELAY
        if c.orderly:
            if not pq.locked:
                return error_delay
            if not self.previously_locked:
                try:
                    self.next_offset = await c.start_offsets.compute(mq)
                except OffsetUnknownError as exc:
                    log.info("%s: %s", c.group, exc)
                    return error_delay
                self.previously_locked = True
        sub = c.subscription_of(mq.topic)
        if sub is None:
            return error_delay
        found = await c.instance.subscribe_addr_of(mq, self.broker_id)
        if found is None:
            return error_delay
        commit = 0
        if o.message_model is MessageModel.CLUSTERING:
            commit = c.offset_store.table.get(mq, 0)
        flag = pull_sys_flag(commit_offset=commit > 0 and not found.slave, suspend=True,
                             subscription=o.post_subscription_when_pull
                             and not sub.class_filter_mode,
                             class_filter=sub.class_filter_mode)
        cmd = pull_request(c.group, mq, self.next_offset, sub, max_nums=o.pull_batch_size,
                           sys_flag=flag, commit_offset=commit,
                           suspend_ms=o.broker_suspend_max_time_millis)
        try:
            result = await c.instance.api.pull(found.addr, cmd, mq, sub, c.group,
                                               o.consumer_timeout_millis_when_suspend / 1000)
        except ServerError as exc:
            if exc.code == ResponseCode.FLOW_CONTROL:
                return BROKER_FLOW_CONTROL_DELAY
            log.warning("%s: pull of %s refused: %s", c.group, mq, exc)
            return error_delay
        except ClientError as exc:
            if not (pq.dropped or c.stopping):
                log.warning("%s: pull of %s failed: %s", c.group, mq, exc)
            return error_delay
        self.broker_id = result.suggest_which_broker_id
        if pq.dropped:
            return 0
        status = result.status
        self.next_offset = result.next_begin_offset
        if status is PullStatus.FOUND:
            if result.messages:
                dispatch = pq.put(result.messages)
                c.submit(result.messages, pq, mq, dispatch)
            return o.pull_interval / 1000
        if status is PullStatus.OFFSET_ILLEGAL:
            log.warning("%s: offset of %s illegal, the broker suggests %d", c.group, mq,
                        result.next_begin_offset)
            pq.dropped = True
            c.spawn(self._offset_moved(result.next_begin_offset))
            return 0
        if pq.msg_count == 0:  # NO_NEW_MSG / NO_MATCHED_MSG: `correctTagsOffset`
            c.offset_store.update(mq, result.next_begin_offset, True)
        return 0

    async def _offset_moved(self, offset: int) -> None:
        await asyncio.sleep(OFFSET_MOVED_DELAY)
        c = self.consumer
        c.offset_store.update(self.mq, offset, False)
        await c.offset_store.persist(self.mq)
        await c.remove_process_queue(self.mq)
