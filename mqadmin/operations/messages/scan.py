"""Reading queues: printMsg and printMsgByQueue as pages, tag counts, consumeMessage, queryCq.

How this works: a queue is read with pulls (`read_queue`: 32 messages a pull, group
TOOLS_CONSUMER, nothing committed), or entry by entry through its consume queue and the
commit log when the topic may not be read (a dead-letter queue made write-only by an older
broker).  A time range becomes offsets with SEARCH_OFFSET_BY_TIMESTAMP per queue, and the
messages read are kept when stored within it (`Stored`): Apache's brokers answer the offset
stored *nearest* a time (ours the first stored at or after it), so the offsets found for
the ends may lie one message outside the range or inside it, and a queue is read from the
offset found for the beginning up to the one past the offset found for the end.  A page is
at most `limit` messages in queue order (broker name, queue id, offset); one message more is
read to know whether the range goes on, and then `MessagePage.next` is the last message's
queue and offset, from which the next page starts (`--after`), so a large topic never floods
the terminal and no page reads more than it shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import NoPermissionError
from engine.client.results import PullStatus
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from engine.protocol.perm import is_readable
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.messages.ids import StoredMessage
from mqadmin.operations.mutation import Progress
from mqadmin.operations.targets import broker_addr_by_name, check_queue_id, route_brokers

Row = dict[str, Any]

CQ_COLUMNS = ("index", "physicOffset", "physicSize", "tagsCode", "extendDataJson", "bitMap",
              "eval", "msg")
PULL_BATCH = 32
#: Messages a page shows unless told (printMsg, printMsgByQueue --limit).
PAGE = 1000
#: Offsets read at a time while counting tags (the records are dropped after each chunk).
COUNT_CHUNK = 4096


@dataclass(frozen=True, slots=True)
class QueueCursor:
    """Where a page of a topic's messages ended: the last message's queue and offset."""

    broker_name: str
    queue_id: int
    offset: int

    def text(self) -> str:
        return f"{self.broker_name}:{self.queue_id}:{self.offset}"

    @classmethod
    def parse(cls, text: str) -> QueueCursor:
        """``BROKER:QUEUE:OFFSET`` as printed after a page.

        Raises:
            UsageProblem: not that form.
        """
        name, _, rest = text.strip().rpartition(":")
        broker, _, queue = name.rpartition(":")
        if not broker or not queue.isdigit() or not rest.lstrip("-").isdigit():
            raise UsageProblem(f"--after {text!r}: give BROKER:QUEUE:OFFSET as the previous "
                               "page printed it, e.g. broker-a:0:999.")
        return cls(broker, int(queue), int(rest))


@dataclass(frozen=True, slots=True)
class MessagePage:
    """Messages of a topic (or a queue) in queue order, and where the next page starts
    (None: nothing follows in the range)."""

    topic: str
    messages: tuple[StoredMessage, ...]
    next: QueueCursor | None


@dataclass(frozen=True, slots=True)
class Stored:
    """Store times kept: from `begin` (inclusive) up to `end` (exclusive), in ms; None: open."""

    begin: int | None = None
    end: int | None = None

    def __contains__(self, record: MessageRecord) -> bool:
        t = record.store_timestamp
        return (self.begin is None or t >= self.begin) and (self.end is None or t < self.end)


ANY_TIME = Stored()


@dataclass(frozen=True, slots=True)
class TagCount:
    tag: str
    count: int


async def _read_entries(admin: MQAdmin, addr: str, mq: MessageQueue, offset: int, end: int,
                        subscription: str, stored: Stored) -> tuple[list[MessageRecord], int]:
    """Messages by their consume-queue entries and commit-log offsets: admin requests, which
    a topic's permission does not forbid (older brokers made dead-letter topics write-only)."""
    body = await admin.broker.query_consume_queue(addr, mq.topic, mq.queue_id, offset,
                                                  min(PULL_BATCH, end - offset))
    records = [await admin.broker.view_message_at(addr, entry.physic_offset)
               for entry in body.queue_data if entry.physic_size > 0]
    wanted = _tags(subscription)
    return ([r for r in records if (wanted is None or (r.tags or "") in wanted) and r in stored],
            offset + len(body.queue_data))


def _tags(subscription: str) -> frozenset[str] | None:
    if not subscription or subscription.strip() == "*":
        return None
    return frozenset(t.strip() for t in subscription.split("||") if t.strip())


async def read_queue(admin: MQAdmin, addr: str, mq: MessageQueue, start: int, end: int, *,
                     subscription: str = "*", limit: int | None = None,
                     stored: Stored = ANY_TIME) -> list[MessageRecord]:
    """The messages of one queue from offset `start` up to (not including) `end`, stored
    within `stored`: pulled, or read entry by entry when the topic may not be read (a
    dead-letter queue made write-only by an older broker)."""
    offset = start
    out: list[MessageRecord] = []
    readable = True
    while offset < end and (limit is None or len(out) < limit):
        if not readable:
            records, after = await _read_entries(admin, addr, mq, offset, end, subscription,
                                                 stored)
            if after <= offset:
                break
            out.extend(r for r in records if r.queue_offset < end)
            offset = after
            continue
        try:
            result = await admin.broker.pull_records(addr, mq, offset,
                                                     max_nums=min(PULL_BATCH, end - offset),
                                                     expression=subscription)
        except NoPermissionError:
            readable = False
            continue
        if result.status is PullStatus.FOUND:
            out.extend(m for m in result.records if m.queue_offset < end and m in stored)
        elif result.status is not PullStatus.NO_MATCHED_MSG:
            break
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return out if limit is None else out[:limit]


async def queue_bounds(admin: MQAdmin, addr: str, mq: MessageQueue, begin: int | None,
                       end: int | None) -> tuple[int, int]:
    """The offsets to read between: the queue's min and max, or around those of the times
    given (the one past the end's: an Apache broker may answer the last message before it;
    what lies outside the times is left out with `Stored`)."""
    low = (await admin.broker.search_offset(addr, mq.topic, mq.queue_id, begin)
           if begin is not None else await admin.broker.min_offset(addr, mq.topic, mq.queue_id))
    high = (await admin.broker.search_offset(addr, mq.topic, mq.queue_id, end) + 1
            if end is not None else await admin.broker.max_offset(addr, mq.topic, mq.queue_id))
    return low, high


async def readable_queues(admin: MQAdmin, topic: str) -> list[tuple[MessageQueue, str]]:
    """Every queue of the topic with the address to read it from (readable or not: a
    dead-letter topic is write-only, and `read_queue` reads it another way).

    Raises:
        TopicNotExistError: no route.
    """
    route, brokers = await route_brokers(admin, topic)
    return [(MessageQueue(topic, q.broker_name, i), brokers[q.broker_name])
            for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if q.broker_name in brokers
            for i in range(max(q.read_queue_nums, q.write_queue_nums if not
                               is_readable(q.perm) else 0))]


def _after(queues: list[tuple[MessageQueue, str]], cursor: QueueCursor | None
           ) -> list[tuple[MessageQueue, str, int]]:
    """The queues a page reads, each with the first offset past `cursor` (0: from the
    range's start)."""
    if cursor is None:
        return [(mq, a, 0) for mq, a in queues]
    key = (cursor.broker_name, cursor.queue_id)
    return [(mq, a, cursor.offset + 1 if (mq.broker_name, mq.queue_id) == key else 0)
            for mq, a in queues if (mq.broker_name, mq.queue_id) >= key]


async def _page(admin: MQAdmin, topic: str, queues: list[tuple[MessageQueue, str, int]], *,
                subscription: str, begin: int | None, end: int | None, limit: int,
                on_progress: Progress | None = None) -> MessagePage:
    """Up to `limit` messages of the queues in order, one more read to know whether the
    range goes on (then `next` is where this page ended)."""
    found: list[StoredMessage] = []
    stored = Stored(begin, end)
    for i, (mq, addr, start) in enumerate(queues):
        if len(found) > limit:
            break
        low, high = await queue_bounds(admin, addr, mq, begin, end)
        records = await read_queue(admin, addr, mq, max(low, start), high,
                                   subscription=subscription, limit=limit + 1 - len(found),
                                   stored=stored)
        found += [StoredMessage(r, addr, mq.broker_name) for r in records]
        if on_progress is not None:
            on_progress(i + 1, len(queues))
    if len(found) <= limit:
        return MessagePage(topic, tuple(found), None)
    last = found[limit - 1]
    cursor = QueueCursor(last.broker_name or "", last.record.queue_id,
                         last.record.queue_offset)
    return MessagePage(topic, tuple(found[:limit]), cursor)


async def print_msg(admin: MQAdmin, topic: str, *, subscription: str = "*",
                    begin: int | None = None, end: int | None = None, limit: int = PAGE,
                    after: QueueCursor | None = None,
                    on_progress: Progress | None = None) -> MessagePage:
    """A page of the messages of every queue of the topic stored between two times (when
    given), in queue order (broker name, queue id, offset), starting past `after`.

    Raises:
        TopicNotExistError: no route.
        UsageProblem: `after` names a queue the topic does not have.
    """
    queues = await readable_queues(admin, topic)
    if after is not None and not any((mq.broker_name, mq.queue_id) == (
            after.broker_name, after.queue_id) for mq, _ in queues):
        raise UsageProblem(f"--after {after.text()}: topic '{topic}' has no queue "
                           f"{after.queue_id} on broker '{after.broker_name}' (see `mqadmin "
                           f"topicRoute -t {topic}`).")
    return await _page(admin, topic, _after(queues, after), subscription=subscription,
                       begin=begin, end=end, limit=limit, on_progress=on_progress)


async def print_msg_by_queue(admin: MQAdmin, topic: str, broker_name: str, queue_id: int, *,
                             subscription: str = "*", begin: int | None = None,
                             end: int | None = None, limit: int = PAGE,
                             after: int | None = None) -> MessagePage:
    """A page of the messages of one queue stored between two times (when given), from
    past queue offset `after`.

    Raises:
        UsageProblem: the queue is not one of the route's.
    """
    await check_queue_id(admin, topic, broker_name, queue_id)
    addr = await broker_addr_by_name(admin, broker_name)
    mq = MessageQueue(topic, broker_name, queue_id)
    start = 0 if after is None else after + 1
    return await _page(admin, topic, [(mq, addr, start)], subscription=subscription,
                       begin=begin, end=end, limit=limit)


async def count_tags(admin: MQAdmin, topic: str, broker_name: str, queue_id: int, *,
                     subscription: str = "*", begin: int | None = None,
                     end: int | None = None) -> list[TagCount]:
    """How many messages of one queue (between two store times) carry each tag, most first
    (printMsgByQueue -f): every message of the range is read, a batch of bodies at a time.

    Raises:
        UsageProblem: the queue is not one of the route's.
    """
    await check_queue_id(admin, topic, broker_name, queue_id)
    addr = await broker_addr_by_name(admin, broker_name)
    mq = MessageQueue(topic, broker_name, queue_id)
    low, high = await queue_bounds(admin, addr, mq, begin, end)
    stored = Stored(begin, end)
    counts: Counter[str] = Counter()
    offset = low
    while offset < high:
        upto = min(high, offset + COUNT_CHUNK)
        counts.update(r.tags for r in await read_queue(admin, addr, mq, offset, upto,
                                                       subscription=subscription, stored=stored)
                      if r.tags and r.tags.strip())
        offset = upto
    return [TagCount(t, n) for t, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


async def consume_message(admin: MQAdmin, topic: str, *, broker_name: str | None = None,
                          queue_id: int | None = None, offset: int | None = None,
                          begin: int | None = None, end: int | None = None,
                          count: int = 128) -> list[StoredMessage]:
    """Up to `count` messages of the topic (of one queue, from an offset), oldest first per
    queue, as Apache's consumeMessage reads them; nothing is committed."""
    if queue_id is not None and broker_name is None:
        raise UsageProblem("-i needs -b: name the broker of the queue.")
    if offset is not None and queue_id is None:
        raise UsageProblem("-o needs -i: name the queue to read from.")
    if queue_id is not None:
        assert broker_name is not None
        await check_queue_id(admin, topic, broker_name, queue_id)
        queues = [(MessageQueue(topic, broker_name, queue_id),
                   await broker_addr_by_name(admin, broker_name))]
    else:
        queues = [(mq, a) for mq, a in await readable_queues(admin, topic)
                  if broker_name is None or mq.broker_name == broker_name]
    found: list[StoredMessage] = []
    for mq, addr in queues:
        if len(found) >= count:
            break
        low, high = await queue_bounds(admin, addr, mq, begin, end)
        if offset is not None:
            low = max(low, offset)
        records = await read_queue(admin, addr, mq, low, high, limit=count - len(found),
                                   stored=Stored(begin, end))
        found += [StoredMessage(r, addr, mq.broker_name) for r in records]
    return found


async def query_cq(admin: MQAdmin, topic: str, queue_id: int, index: int, count: int = 10, *,
                   broker_addr: str | None = None, group: str | None = None
                   ) -> tuple[list[Row], dict[str, Any]]:
    """`count` consume-queue entries of one queue from `index`, and the queue's bounds (and
    the group's subscription) as the broker reports them."""
    route = await admin.namesrv.topic_route(topic)
    first = sorted(route.broker_datas, key=lambda d: d.broker_name)
    if broker_addr is None:
        broker_addr = next((a for d in first if (a := d.master_addr()) is not None), None)
        if broker_addr is None:
            raise TargetNotFound(f"topic '{topic}' has no master broker online; pass -b.")
    name = next((d.broker_name for d in first if broker_addr in d.broker_addrs.values()), None)
    await check_queue_id(admin, topic, name, queue_id)
    body = await admin.broker.query_consume_queue(broker_addr, topic, queue_id, index, count,
                                                  group=group)
    rows = [{"index": index + i, "physicOffset": d.physic_offset, "physicSize": d.physic_size,
             "tagsCode": d.tags_code, "extendDataJson": d.extend_data_json,
             "bitMap": d.bit_map, "eval": d.eval, "msg": d.msg}
            for i, d in enumerate(body.queue_data)]
    info = {"broker": broker_addr, "maxQueueIndex": body.max_queue_index,
            "minQueueIndex": body.min_queue_index,
            "subscription": body.subscription_data.sub_string if body.subscription_data
            else None, "filterData": body.filter_data}
    return rows, info
