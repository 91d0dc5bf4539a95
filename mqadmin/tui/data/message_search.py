"""The Messages screen's searches: a topic's messages newest first in pages, by key, by id
(either kind, saying which it was), and the rows it lists them in.

How this works: everything reads through the message operations (messages/query.py, ids.py,
scan.py) and returns values; nothing here draws.  A topic page is newest first
across every queue: each queue of the topic is read backwards from its end of the time range
in small chunks, and the chunks are merged by store time (then commit-log offset: the order
within a millisecond on one broker), so a page reads about what it shows (plus one chunk per
queue).  `NewestCursor` keeps, per queue, the offset below which the next
page starts; the screen keeps the cursors of the pages before, which is how it goes back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from mqadmin.operations.messages import query as message_ops
from mqadmin.operations.messages.ids import StoredMessage, find_by_id
from mqadmin.operations.messages.scan import queue_bounds, read_queue, readable_queues
from mqadmin.operations.times import format_time
from mqadmin.operations.topic import topic_list

Row = dict[str, Any]
#: Messages a topic page shows.
PAGE = 50
#: Messages read from a queue at a time while merging (backwards from its end).
CHUNK = 32
#: Messages a key search returns.
KEY_LIMIT = 64

QueueKey = tuple[str, int]  # broker name, queue id


# ---------------------------------------------------------------------------- pages


@dataclass(frozen=True, slots=True)
class NewestCursor:
    """Where the next (older) page starts: per queue, the offset it reads below."""

    below: tuple[tuple[str, int, int], ...]  # broker name, queue id, offset

    def of(self, key: QueueKey) -> int | None:
        return next((o for b, q, o in self.below if (b, q) == key), None)


@dataclass(frozen=True, slots=True)
class TopicSearch:
    """A search of a topic over store times (ms; None: unbounded)."""

    topic: str
    begin: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class MessageList:
    """What the Messages screen lists: the messages (newest first), how they were found,
    and for a topic page where the next page starts (None: the range ends here)."""

    title: str
    messages: tuple[StoredMessage, ...]
    next: NewestCursor | None = None
    #: An id search: which kind the id was ("message id" or "offset message id").
    id_kind: str | None = None


@dataclass
class _Queue:
    mq: MessageQueue
    addr: str
    low: int
    up: int  # the chunks read so far start here (offsets below are unread)
    start: int  # where this page started reading (the exclusive upper bound)
    buffer: list[MessageRecord]


async def _refill(admin: MQAdmin, q: _Queue, search: TopicSearch) -> None:
    """Read the next chunk below `q.up` until one has a message in the time range."""
    while not q.buffer and q.up > q.low:
        start = max(q.low, q.up - CHUNK)
        records = await read_queue(admin, q.addr, q.mq, start, q.up)
        q.up = start
        q.buffer = sorted((r for r in records if _in_range(r, search)),
                          key=lambda r: r.queue_offset, reverse=True)


def _in_range(record: MessageRecord, search: TopicSearch) -> bool:
    return (search.begin is None or record.store_timestamp >= search.begin) and (
        search.end is None or record.store_timestamp <= search.end)


async def newest_page(admin: MQAdmin, search: TopicSearch, cursor: NewestCursor | None = None,
                      limit: int = PAGE) -> MessageList:
    """Up to `limit` messages of the topic stored in the search's range, newest first,
    older than `cursor` (the previous page's `next`).

    Raises:
        TopicNotExistError: no route.
    """
    queues = await readable_queues(admin, search.topic)
    bounds = await asyncio.gather(*(queue_bounds(admin, a, mq, search.begin, search.end)
                                    for mq, a in queues))
    state: list[_Queue] = []
    for (mq, addr), (low, high) in zip(queues, bounds, strict=True):
        # search_offset finds the first message at or after `end`: that one may be in range
        top = high + 1 if search.end is not None else high
        below = cursor.of((mq.broker_name, mq.queue_id)) if cursor is not None else None
        start = min(top, below) if below is not None else top
        state.append(_Queue(mq, addr, low, start, start, []))
    await asyncio.gather(*(_refill(admin, q, search) for q in state))
    taken: list[tuple[_Queue, MessageRecord]] = []
    while len(taken) <= limit:
        ready = [q for q in state if q.buffer]
        if not ready:
            break
        # the same millisecond: the commit-log offset tells the order on one broker
        q = max(ready, key=lambda q: (q.buffer[0].store_timestamp, q.buffer[0].physical_offset,
                                      q.mq.broker_name, q.mq.queue_id))
        taken.append((q, q.buffer.pop(0)))
        await _refill(admin, q, search)
    shown = taken[:limit]
    title = f"{search.topic}, {range_text(search)}, newest first"
    messages = tuple(StoredMessage(r, q.addr, q.mq.broker_name) for q, r in shown)
    if len(taken) <= limit:
        return MessageList(title, messages)
    after = {(q.mq.broker_name, q.mq.queue_id): q.start for q in state}
    for q, r in shown:
        key = (q.mq.broker_name, q.mq.queue_id)
        after[key] = min(after[key], r.queue_offset)
    return MessageList(title, messages, NewestCursor(tuple((b, i, o) for (b, i), o
                                                           in sorted(after.items()))))


def range_text(search: TopicSearch) -> str:
    if search.begin is None and search.end is None:
        return "every message kept"
    since = format_time(search.begin) if search.begin else "the oldest"
    until = format_time(search.end) if search.end else "now"
    return f"stored {since} to {until}"


# ---------------------------------------------------------------------------- key and id


async def by_key(admin: MQAdmin, topic: str, key: str) -> MessageList:
    """The messages of `topic` with this key (the brokers' index), newest first.

    Raises:
        TopicNotExistError: no route.
    """
    found = await message_ops.query_by_key(admin, topic, key, max_num=KEY_LIMIT)
    return MessageList(f"{topic}, key {key!r}", tuple(reversed(found)))


async def by_id(admin: MQAdmin, msg_id: str, topic: str | None = None) -> MessageList:
    """The message(s) with this id, and which kind of id it was: an offset message id names
    one stored message; a message id (UNIQ_KEY) may find its retry and dead-letter copies
    too (originals first).

    Raises:
        UsageProblem: not an id's text.
        NotAMessageId: no message has it (the error says why for either kind).
    """
    msg_id = msg_id.strip()
    found = await find_by_id(admin, msg_id, topic)
    offset_id = len(found) == 1 and found[0].record.offset_msg_id.upper() == msg_id.upper()
    kind = "offset message id" if offset_id else "message id"
    return MessageList(f"{kind} {msg_id}", tuple(found), id_kind=kind)


@dataclass(frozen=True, slots=True)
class KeySearch:
    topic: str
    key: str


@dataclass(frozen=True, slots=True)
class IdSearch:
    msg_id: str
    topic: str | None = None


Search = TopicSearch | KeySearch | IdSearch


async def search(admin: MQAdmin, what: Search, cursor: NewestCursor | None = None,
                 limit: int = PAGE) -> MessageList:
    """Run one search of the Messages screen (a topic page of `limit` from `cursor`)."""
    if isinstance(what, TopicSearch):
        return await newest_page(admin, what, cursor, limit)
    if isinstance(what, KeySearch):
        return await by_key(admin, what.topic, what.key)
    return await by_id(admin, what.msg_id, what.topic)


async def topic_names(admin: MQAdmin) -> list[str]:
    """Every topic's name (what the search form suggests)."""
    return [row["topic"] for row in await topic_list(admin)]


def list_rows(found: MessageList) -> list[Row]:
    """The Messages screen's rows: where each message is and a one-line body preview."""
    rows = []
    for m in found.messages:
        r = m.record
        flat = " ".join(r.body.decode("utf-8", "replace").split())
        rows.append({"key": r.offset_msg_id, "storeTime": format_time(r.store_timestamp),
                     "storedMs": r.store_timestamp, "topic": r.topic,
                     "queue": f"{m.broker_name}:{r.queue_id}", "queueOffset": r.queue_offset,
                     "msgId": r.msg_id, "tags": r.tags, "keys": " ".join(r.keys) or None,
                     "size": len(r.body), "preview": flat if len(flat) <= 60
                     else flat[:59] + "…"})
    return rows
