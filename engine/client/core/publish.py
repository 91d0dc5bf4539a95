"""Where a producer may write a topic (`TopicPublishInfo`) and which queue it picks next.

How this works (client-behaviour.md §2.2-2.3): the publish queues of a route are, per
writable QueueData of a broker that has a master, sorted by broker name, queue ids
0..writeQueueNums-1 - or exactly the brokers and counts of `orderTopicConf`.  A `QueueIndex`
is Java's `ThreadLocalIndex` (one per topic per producer; asyncio has one thread): it starts
at a random non-negative int and each pick takes the next value masked to 31 bits.  With
fault tolerance off a retry walks the queues for one on another broker; with it on the first
queue of an available broker wins, else the least bad broker gets the next queue id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from engine.client.core.fault import LatencyFaultTolerance
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import MASTER_ID, TopicRouteData
from engine.protocol.perm import is_readable, is_writeable


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    topic: str
    queues: tuple[MessageQueue, ...] = ()
    order_topic: bool = False
    write_queue_nums: dict[str, int] = field(default_factory=dict)  # broker -> count

    @property
    def ok(self) -> bool:
        return bool(self.queues)


def publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """`topicRouteData2TopicPublishInfo`."""
    queues: list[MessageQueue] = []
    counts: dict[str, int] = {}
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                counts[name] = int(nums)
                queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        return TopicPublishInfo(topic, tuple(queues), True, counts)
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if is_writeable(qd.perm) and qd.broker_name in masters:
            counts[qd.broker_name] = qd.write_queue_nums
            queues.extend(MessageQueue(topic, qd.broker_name, i)
                          for i in range(qd.write_queue_nums))
    return TopicPublishInfo(topic, tuple(queues), False, counts)


def subscribe_queues(topic: str, route: TopicRouteData) -> frozenset[MessageQueue]:
    """`topicRouteData2TopicSubscribeInfo`: every readable queue (no master needed)."""
    return frozenset(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                     if is_readable(qd.perm) for i in range(qd.read_queue_nums))


class QueueIndex:
    """Java's `ThreadLocalIndex`."""

    __slots__ = ("value",)

    def __init__(self, start: int | None = None) -> None:
        self.value = random.getrandbits(31) if start is None else start

    def next(self) -> int:
        self.value = (self.value + 1) & 0x7FFFFFFF
        return self.value


def select_queue(info: TopicPublishInfo, index: QueueIndex, last_broker: str | None,
                 fault: LatencyFaultTolerance) -> MessageQueue:
    """`MQFaultStrategy.selectOneMessageQueue`."""
    queues = info.queues
    n = len(queues)
    if fault.enabled:
        start = index.next()
        for i in range(n):
            mq = queues[(start + i) % n]
            if fault.is_available(mq.broker_name):
                return mq
        worst = fault.pick_one_at_least()
        nums = info.write_queue_nums.get(worst, 0) if worst is not None else 0
        if worst is not None and nums > 0:
            index.next()  # Java advances the index for the plain pick it then re-targets
            return MessageQueue(info.topic, worst, index.next() % nums)
        if worst is not None:
            fault.remove(worst)
        return queues[index.next() % n]
    if last_broker is not None:
        for _ in range(n):
            mq = queues[index.next() % n]
            if mq.broker_name != last_broker:
                return mq
    return queues[index.next() % n]
