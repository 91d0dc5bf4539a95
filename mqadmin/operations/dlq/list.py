"""`dlq list`: every group with a dead-letter topic, its totals, age, growth and top topics.

How this works: each broker's topic table (GET_ALL_TOPIC_CONFIG, one request a broker) names
the ``%DLQ%`` topics it holds; for each such queue, GET_TOPIC_STATS_INFO gives its offsets
and last store time, GET_EARLIEST_MSG_STORETIME the oldest store time, and the growth over
the last hour and day comes from SEARCH_OFFSET_BY_TIMESTAMP (skipped when the times alone
answer it).  The top original topics are counted over the newest `SAMPLE` dead letters of
each queue.  Unhandled = dead letters still in the queue that the ledger does not record as
resent or discarded.  Queues are read `PARALLEL` at a time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.perm import is_readable
from mqadmin.operations.dlq.ledger import Ledger
from mqadmin.operations.dlq.model import DeadLetter, Row, counts_by
from mqadmin.operations.dlq.read import DlqQueue, read_chunk
from mqadmin.operations.mutation import Progress
from mqadmin.operations.targets import DLQ_PREFIX, masters
from mqadmin.operations.times import format_time

LIST_COLUMNS = ("group", "deadLetters", "unhandled", "oldest", "newest", "lastHour",
                "lastDay", "topTopics", "brokers")
SAMPLE = 32
PARALLEL = 64
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(slots=True)
class _Group:
    group: str
    queues: list[DlqQueue] = field(default_factory=list)
    total: int = 0
    unhandled: int = 0
    oldest: int = 0
    newest: int = 0
    hour: int = 0
    day: int = 0
    topics: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _dlq_queues(admin: MQAdmin, group: str | None) -> dict[str, _Group]:
    brokers = await masters(admin, or_slave=True)
    tables = await asyncio.gather(*(admin.broker.all_topic_config(a) for a in brokers.values()),
                                  return_exceptions=True)
    groups: dict[str, _Group] = {}
    for (name, addr), table in zip(brokers.items(), tables, strict=True):
        if isinstance(table, BaseException):
            if not isinstance(table, ClientError):
                raise table
            continue
        for topic, config in table.topic_config_table.items():
            if not topic.startswith(DLQ_PREFIX):
                continue
            g = topic[len(DLQ_PREFIX):]
            if group is not None and g != group:
                continue
            entry = groups.setdefault(g, _Group(g))
            for i in range(max(config.read_queue_nums, config.write_queue_nums)):
                entry.queues.append(DlqQueue(MessageQueue(topic, name, i), addr,
                                             is_readable(config.perm)))
    return groups


async def _queue(admin: MQAdmin, g: _Group, q: DlqQueue, handled: set[str],
                 now: int, sample: int) -> None:
    topic, qid, addr = q.mq.topic, q.mq.queue_id, q.addr
    stats = (await admin.broker.topic_stats(addr, topic)).offset_table
    offsets = next((o for mq, o in stats.items() if mq.queue_id == qid), None)
    if offsets is None or offsets.max_offset <= offsets.min_offset:
        return
    q.low, q.high = offsets.min_offset, offsets.max_offset
    total = q.high - q.low
    g.total += total
    g.unhandled += total - sum(1 for k in handled if _in(k, q))
    oldest = await admin.broker.earliest_msg_store_time(addr, topic, qid)
    newest = offsets.last_update_timestamp
    if oldest > 0:
        g.oldest = min(g.oldest or oldest, oldest)
    g.newest = max(g.newest, newest)
    for since, attr in ((now - HOUR_MS, "hour"), (now - DAY_MS, "day")):
        if newest and newest < since:
            grown = 0
        elif oldest > 0 and oldest >= since:
            grown = total
        else:
            found = await admin.broker.search_offset(addr, topic, qid, since)
            grown = q.high - min(max(found, q.low), q.high)
        setattr(g, attr, getattr(g, attr) + grown)
    if sample > 0:
        start = max(q.low, q.high - sample)
        records = await read_chunk(admin, q, start, q.high - start)
        g.topics += [DeadLetter.of(r, g.group, q.mq.broker_name).origin_topic for r in records]


def _in(key: str, q: DlqQueue) -> bool:
    broker, qid, offset = key.rsplit(":", 2)
    return (broker == q.mq.broker_name and int(qid) == q.mq.queue_id
            and q.low <= int(offset) < q.high)


async def list_groups(admin: MQAdmin, ledger: Ledger | None = None, *,
                      group: str | None = None, sample: int = SAMPLE,
                      on_progress: Progress | None = None) -> list[Row]:
    """One row per group that has a dead-letter topic (or only `group`), by group name."""
    groups = await _dlq_queues(admin, group)
    now = int(time.time() * 1000)
    gate = asyncio.Semaphore(PARALLEL)
    jobs = [(g, q) for g in groups.values() for q in g.queues]
    done = 0

    async def one(g: _Group, q: DlqQueue, handled: set[str]) -> None:
        nonlocal done
        async with gate:
            try:
                await _queue(admin, g, q, handled, now, sample)
            except ClientError as exc:
                g.errors.append(f"{q.mq.broker_name}: {exc}")
        done += 1
        if on_progress is not None:
            on_progress(done, len(jobs))

    handled = {g: (ledger.handled(g) if ledger is not None else set()) for g in groups}
    await asyncio.gather(*(one(g, q, handled[g.group]) for g, q in jobs))
    return [_row(g) for _, g in sorted(groups.items())]


def _row(g: _Group) -> Row:
    return {"group": g.group, "deadLetters": g.total, "unhandled": max(g.unhandled, 0),
            "oldest": format_time(g.oldest), "newest": format_time(g.newest),
            "lastHour": g.hour, "lastDay": g.day, "topTopics": counts_by(g.topics, 3) or None,
            "brokers": ", ".join(sorted({q.mq.broker_name for q in g.queues})),
            "errors": "; ".join(g.errors) or None}
