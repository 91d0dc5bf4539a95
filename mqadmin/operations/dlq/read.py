"""Reading a group's dead-letter queues: which queues, which offsets, and the messages in them.

How this works: ``%DLQ%<group>`` has one queue on each broker the group failed messages on;
each is read from its master (or a slave while the master is away).  A readable queue (perm
6, as Apache creates DLQs since 4.9.2 and this engine does) is pulled in windows of
`WINDOW` concurrent pulls of 32; a write-only one (perm 2, older brokers) cannot be pulled,
so its consume-queue entries are read (QUERY_CONSUME_QUEUE) and each message fetched by
commit-log offset (VIEW_MESSAGE_BY_ID), admin requests no permission forbids.  Store-time
bounds become offsets with SEARCH_OFFSET_BY_TIMESTAMP.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from engine.client.errors import NoPermissionError, TopicNotExistError
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from engine.protocol.perm import is_readable
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.dlq.model import DeadLetter, Filters
from mqadmin.operations.mutation import Progress
from mqadmin.operations.targets import dlq_topic, route_brokers

CHUNK = 32  # messages per pull (Apache's maxTransferCountOnMessageInMemory)
WINDOW = 32  # pulls in flight per queue


@dataclass(slots=True)
class DlqQueue:
    """One queue of a dead-letter topic and how to read it."""

    mq: MessageQueue
    addr: str
    readable: bool  # pulls allowed (perm 6); else read entry by entry
    low: int = 0
    high: int = 0


def no_dead_letters(group: str) -> TargetNotFound:
    return TargetNotFound(f"group '{group}' has no dead letters (no topic {dlq_topic(group)}). "
                          "See the groups that have some with `mqadmin dlq list`.")


async def dlq_queues(admin: MQAdmin, group: str) -> list[DlqQueue]:
    """The queues of the group's dead-letter topic, one or more per broker.

    Raises:
        TargetNotFound: the group has no dead-letter topic.
    """
    try:
        route, brokers = await route_brokers(admin, dlq_topic(group))
    except TopicNotExistError:
        raise no_dead_letters(group) from None
    return [DlqQueue(MessageQueue(dlq_topic(group), q.broker_name, i), brokers[q.broker_name],
                     is_readable(q.perm))
            for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if q.broker_name in brokers
            for i in range(max(q.read_queue_nums, q.write_queue_nums))]


async def bound(admin: MQAdmin, q: DlqQueue, since: int | None, until: int | None) -> DlqQueue:
    """Set the queue's [low, high) offsets: all of it, or the messages stored in the times."""
    topic, qid = q.mq.topic, q.mq.queue_id
    low = await admin.broker.min_offset(q.addr, topic, qid)
    high = await admin.broker.max_offset(q.addr, topic, qid)
    if since is not None and high > low:
        low = max(low, await admin.broker.search_offset(q.addr, topic, qid, since))
    if until is not None and high > low:  # one past what the search finds: the filter cuts
        found = await admin.broker.search_offset(q.addr, topic, qid, until)
        high = min(high, found + 1)
    q.low, q.high = low, max(high, low)
    return q


async def _entries(admin: MQAdmin, q: DlqQueue, start: int, n: int) -> list[MessageRecord]:
    body = await admin.broker.query_consume_queue(q.addr, q.mq.topic, q.mq.queue_id, start, n)
    return list(await asyncio.gather(*(
        admin.broker.view_message_at(q.addr, e.physic_offset)
        for e in body.queue_data if e.physic_size > 0)))


async def read_chunk(admin: MQAdmin, q: DlqQueue, start: int, n: int) -> list[MessageRecord]:
    """The records at queue offsets [start, start + n), in offset order."""
    end = start + n
    out: list[MessageRecord] = []
    offset = start
    while offset < end:
        if not q.readable:
            records = await _entries(admin, q, offset, end - offset)
            return out + [r for r in records if offset <= r.queue_offset < end]
        try:
            pulled = await admin.broker.pull_records(q.addr, q.mq, offset, max_nums=end - offset)
        except NoPermissionError:
            q.readable = False
            continue
        out += [r for r in pulled.records if offset <= r.queue_offset < end]
        if pulled.next_begin_offset <= offset or not pulled.records:
            break
        offset = pulled.next_begin_offset
    return out


async def scan(admin: MQAdmin, group: str, filters: Filters | None = None, *,
               on_progress: Progress | None = None) -> AsyncIterator[list[DeadLetter]]:
    """The group's dead letters matching `filters`, a chunk at a time, oldest first per queue.

    Raises:
        TargetNotFound: the group has no dead-letter topic.
    """
    filters = filters or Filters()
    queues = await asyncio.gather(*(bound(admin, q, filters.since, filters.until)
                                    for q in await dlq_queues(admin, group)))
    total = sum(q.high - q.low for q in queues)
    done = 0
    left = filters.limit
    for q in queues:
        starts = list(range(q.low, q.high, CHUNK))
        for i in range(0, len(starts), WINDOW):
            window = starts[i:i + WINDOW]
            chunks = await asyncio.gather(*(read_chunk(admin, q, s, min(CHUNK, q.high - s))
                                            for s in window))
            found = [d for chunk in chunks for r in chunk
                     if filters.matches(d := DeadLetter.of(r, group, q.mq.broker_name))]
            if left is not None:
                found = found[:left]
                left -= len(found)
            done += sum(min(CHUNK, q.high - s) for s in window)
            if on_progress is not None:
                on_progress(done, total)
            if found:
                yield found
            if left is not None and left <= 0:
                return


async def read_all(admin: MQAdmin, group: str, filters: Filters | None = None, *,
                   on_progress: Progress | None = None) -> list[DeadLetter]:
    """Every dead letter of the group matching `filters` (see `scan`)."""
    return [d async for chunk in scan(admin, group, filters, on_progress=on_progress)
            for d in chunk]
