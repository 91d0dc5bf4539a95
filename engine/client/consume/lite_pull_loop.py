"""A lite pull consumer's per-queue pull task, feeding the consumer's cache of pulled batches.

How this works: the task long-polls its queue (held up to `broker_suspend_max_time_millis`)
with a lite-pull request that carries the subscription and no commit offset, and appends
each non-empty answer to the consumer's cache for `poll()`.  It waits 50 ms while the cache
or the queue is over a threshold (10 000 messages cached over all queues, 1000 / 100 MiB /
a 2000-offset span for the queue), 1 s while the queue is paused or after a failure.  An
illegal offset moves on to the broker's next offset, as Java's lite pull does.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from engine.client.consume.consumer_options import LitePullOptions
from engine.client.consume.process_queue import ProcessQueue
from engine.client.core.errors import ClientError, ClientStateError
from engine.client.core.instance import ClientInstance
from engine.client.core.message import MessageExt
from engine.client.core.pull_codec import pull_request, pull_sys_flag
from engine.client.core.results import PullStatus
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.body.message_queue import MessageQueue

log = logging.getLogger(__name__)

FLOW_CONTROL_DELAY = 0.05
PAUSE_DELAY = 1.0
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LiteBatch:
    """One pull's messages, waiting in the cache for `poll()`."""

    mq: MessageQueue
    pq: ProcessQueue
    msgs: list[MessageExt]


class LiteHost(Protocol):
    """What a pull task uses of its `LitePullConsumer` (which imports this module)."""

    group: str
    instance: ClientInstance
    options: LitePullOptions
    paused_queues: set[MessageQueue]
    stopping: bool

    def cache_full(self) -> bool:
        """Whether the consumer's cache of pulled batches is over its threshold."""

    def subscription_of(self, topic: str) -> SubscriptionData:
        """The subscription a pull of `topic` carries."""

    def deliver(self, batch: LiteBatch) -> None:
        """Append a pulled batch to the consumer's cache for `poll()`."""


def flow_delay(consumer: LiteHost, mq: MessageQueue, pq: ProcessQueue) -> float:
    o = consumer.options
    if mq in consumer.paused_queues:
        return PAUSE_DELAY
    if (consumer.cache_full() or pq.msg_count > o.pull_threshold_for_queue
            or pq.msg_size > o.pull_threshold_size_for_queue * MIB
            or pq.max_span() > o.consume_max_span):
        return FLOW_CONTROL_DELAY
    return 0.0


async def lite_pull_loop(consumer: LiteHost, mq: MessageQueue, pq: ProcessQueue,
                         offset: int) -> None:
    c, o = consumer, consumer.options
    error_delay = o.pull_time_delay_millis_when_exception / 1000
    flag = pull_sys_flag(commit_offset=False, suspend=True, subscription=True, lite_pull=True)
    while not (pq.dropped or c.stopping):
        delay = flow_delay(c, mq, pq)
        if delay:
            await asyncio.sleep(delay)
            continue
        sub = c.subscription_of(mq.topic)
        found = await c.instance.subscribe_addr_of(mq)
        cmd = pull_request(c.group, mq, offset, sub, max_nums=o.pull_batch_size, sys_flag=flag,
                           commit_offset=0, suspend_ms=o.broker_suspend_max_time_millis)
        try:
            if found is None:
                raise ClientStateError(f"no address for broker {mq.broker_name}")
            result = await c.instance.api.pull(found.addr, cmd, mq, sub, c.group,
                                               o.consumer_timeout_millis_when_suspend / 1000)
        except ClientError as exc:
            if not (pq.dropped or c.stopping):
                log.warning("%s: pull of %s failed: %s", c.group, mq, exc)
            await asyncio.sleep(error_delay)
            continue
        if pq.dropped:
            return
        if result.status is PullStatus.FOUND and result.messages:
            pq.put(result.messages)
            c.deliver(LiteBatch(mq, pq, result.messages))
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("%s: offset %d of %s illegal; continuing at %d", c.group, offset, mq,
                        result.next_begin_offset)
        offset = result.next_begin_offset
