"""Who loses what when commit-log segments are deleted: per segment, per consumer group,
the unconsumed messages it holds (retry and dead-letter topics included).

How this works: on the broker, each group's consume stats give, per queue, the committed
offset and the max offset; every message between them is unconsumed.  Dead-letter topics
(``%DLQ%<group>``) are usually consumed by nobody, so every dead letter still stored
counts, from the group's committed offset on that topic if it has one, else from the
queue's min offset.  For each queue with unconsumed messages, an exact binary search of
the consume queue (QUERY_CONSUME_QUEUE) finds the first offset at or past each segment's
start and end: the difference is what the group loses with that segment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from engine.protocol.body.message_queue import MessageQueue
from mqadmin.operations.lag.retention import offset_at_phys
from mqadmin.operations.lag.sample import Errors, list_groups
from mqadmin.operations.targets import DLQ_PREFIX, dlq_topic

CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class Loss:
    """Unconsumed messages of one group's topic in one segment about to be deleted."""

    segment: str  # the segment's file name (20-digit start offset)
    group: str
    topic: str
    messages: int


@dataclass(frozen=True, slots=True)
class SegmentRange:
    name: str
    from_offset: int
    to_offset: int  # exclusive


async def _unconsumed(admin: MQAdmin, addr: str, groups: Sequence[str],
                      topics: set[str]) -> list[tuple[str, MessageQueue, int, int]]:
    """(group, queue, committed offset, max offset) for every queue with unconsumed
    messages on the broker at `addr`."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(group: str) -> list[tuple[str, MessageQueue, int, int]]:
        out: list[tuple[str, MessageQueue, int, int]] = []
        async with gate:
            try:
                stats = (await admin.broker.consume_stats(addr, group)).offset_table
            except Errors:
                stats = {}
            for mq, w in stats.items():
                if w.broker_offset > w.consumer_offset:
                    out.append((group, mq, w.consumer_offset, w.broker_offset))
            dlq = dlq_topic(group)
            if dlq in topics and not any(mq.topic == dlq for mq in stats):
                try:
                    table = (await admin.broker.topic_stats(addr, dlq)).offset_table
                except Errors:
                    table = {}
                out += [(group, mq, o.min_offset, o.max_offset) for mq, o in table.items()
                        if o.max_offset > o.min_offset]
        return out

    found = await asyncio.gather(*(one(g) for g in groups))
    return [row for rows in found for row in rows]


async def losses(admin: MQAdmin, addr: str, segments: Sequence[SegmentRange]) -> list[Loss]:
    """What each group loses with each of `segments` (oldest first) on broker `addr`."""
    if not segments:
        return []
    topics = set((await admin.namesrv.all_topics()).topic_list)
    groups = list_groups(topics)
    dlq_groups = [t[len(DLQ_PREFIX):] for t in topics if t.startswith(DLQ_PREFIX)]
    groups = sorted(set(groups) | set(dlq_groups))
    queues = await _unconsumed(admin, addr, groups, topics)
    bounds = [segments[0].from_offset] + [s.to_offset for s in segments]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def per_queue(group: str, mq: MessageQueue, low: int, high: int) -> list[Loss]:
        async with gate:
            offsets: list[int] = []
            for phys in bounds:
                start = offsets[-1] if offsets else low
                offsets.append(await offset_at_phys(admin, addr, mq.topic, mq.queue_id, phys,
                                                    start, high))
        return [Loss(seg.name, group, mq.topic, offsets[i + 1] - offsets[i])
                for i, seg in enumerate(segments) if offsets[i + 1] > offsets[i]]

    found = await asyncio.gather(*(per_queue(*q) for q in queues))
    merged: dict[tuple[str, str, str], int] = {}
    for loss in (x for xs in found for x in xs):
        key = (loss.segment, loss.group, loss.topic)
        merged[key] = merged.get(key, 0) + loss.messages
    return [Loss(s, g, t, n) for (s, g, t), n in sorted(merged.items())]


def summary(found: Sequence[Loss]) -> str:
    """``demo-laggard 59 (DemoOrders 40, %RETRY%demo-laggard 19); g2 3 (T 3)``."""
    by_group: dict[str, dict[str, int]] = {}
    for loss in found:
        topics = by_group.setdefault(loss.group, {})
        topics[loss.topic] = topics.get(loss.topic, 0) + loss.messages
    return "; ".join(
        f"{g} {sum(t.values()):,} (" + ", ".join(f"{k} {v:,}" for k, v in sorted(t.items()))
        + ")" for g, t in sorted(by_group.items()))
