"""The Messages screen's data: a topic's messages newest first in pages, by key, by id (either
kind, saying which it was), one message's detail, the clients a message can be handed to,
its trace as a timeline (timeline.py), its export.

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
import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import ConsumerNotOnlineError, TopicNotExistError
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from engine.protocol.version import version_desc
from mqadmin.exit_codes import CliError
from mqadmin.operations.messages import query as message_ops
from mqadmin.operations.messages.ids import StoredMessage, find_by_id
from mqadmin.operations.messages.query import MessageDetail
from mqadmin.operations.messages.scan import queue_bounds, read_queue, readable_queues
from mqadmin.operations.times import format_time
from mqadmin.tui.data.timeline import Timeline, read_timeline

Row = dict[str, Any]
#: Messages a topic page shows.
PAGE = 50
#: Messages read from a queue at a time while merging (backwards from its end).
CHUNK = 32
#: Messages a key search returns.
KEY_LIMIT = 64
#: Bytes per line of the hex view.
HEX_WIDTH = 16

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
    return sorted((await admin.namesrv.all_topics()).topic_list)


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


# ---------------------------------------------------------------------------- one message


@dataclass(frozen=True, slots=True)
class Body:
    """A message body as the detail shows it: text, JSON pretty-printed when it parses
    (None otherwise), and a hex dump."""

    text: str
    json: str | None
    hex: str
    size: int


def body_of(raw: bytes) -> Body:
    text = raw.decode("utf-8", "replace")
    try:
        pretty: str | None = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = None
    return Body(text, pretty, hex_dump(raw), len(raw))


def hex_dump(raw: bytes) -> str:
    """Offset, hex bytes and printable characters, `HEX_WIDTH` bytes a line."""
    lines = []
    for at in range(0, len(raw), HEX_WIDTH):
        chunk = raw[at:at + HEX_WIDTH]
        digits = " ".join(f"{b:02x}" for b in chunk)
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {digits:<{HEX_WIDTH * 3 - 1}}  {shown}")
    return "\n".join(lines)


def where_stored(m: StoredMessage) -> list[tuple[str, str]]:
    """Where the message is kept: broker, queue, offsets, hosts and times."""
    row = message_ops.message_row(m, charset=None)
    return [(label, "" if row[k] is None else str(row[k])) for label, k in (
        ("topic", "topic"), ("broker", "brokerName"), ("queue", "queueId"),
        ("queue offset", "queueOffset"), ("commit-log offset", "commitLogOffset"),
        ("store host", "storeHost"), ("stored", "storeTime"), ("born host", "bornHost"),
        ("born", "bornTime"), ("message id", "msgId"), ("offset message id", "offsetMsgId"),
        ("tags", "tags"), ("keys", "keys"), ("reconsume times", "reconsumeTimes"))]


@dataclass(frozen=True, slots=True)
class MessageView:
    """What the message screen shows: the detail and the trace timeline, read together."""

    detail: MessageDetail
    timeline: Timeline


async def read_detail(admin: MQAdmin, found: StoredMessage) -> MessageView:
    """The message, for each group consuming its topic whether it consumed it, and its
    trace as a timeline."""
    detail, steps = await asyncio.gather(message_ops.detail(admin, found),
                                         read_timeline(admin, found.record))
    return MessageView(detail, steps)


@dataclass(frozen=True, slots=True)
class Client:
    """An online consumer a message can be handed to (consume directly)."""

    group: str
    client_id: str
    addr: str
    language: str
    version: str


async def online_clients(admin: MQAdmin, groups: list[str]) -> list[Client]:
    """The online clients of each group (groups with none are left out)."""
    async def one(group: str) -> list[Client]:
        try:
            cc = await admin.consumer_connections(group)
        except (ConsumerNotOnlineError, TopicNotExistError):
            return []
        return [Client(group, c.client_id, c.client_addr, c.language.name,
                       version_desc(c.version))
                for c in sorted(cc.connection_set, key=lambda c: c.client_id)]
    found = await asyncio.gather(*(one(g) for g in groups))
    return [c for cs in found for c in cs]


def export_record(m: StoredMessage) -> Row:
    """What export writes: every field and property, the body as text when it is UTF-8,
    else in base64 (``bodyBase64``)."""
    row = message_ops.message_row(m, charset=None)
    row.pop("tracks", None)
    raw = m.record.body
    try:
        row["body"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        row.pop("body", None)
        row["bodyBase64"] = base64.b64encode(raw).decode("ascii")
    return row


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path  # absolute
    replaced: bool  # a file of that name was there before


def export_message(m: StoredMessage, path: Path) -> Exported:
    """Write the message (export_record, as JSON) to `path` (relative: under the current
    directory).

    Raises:
        CliError: the file cannot be written.
    """
    target = path.expanduser().absolute()
    replaced = target.exists()
    try:
        target.write_text(json.dumps(export_record(m), indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {target}: {exc.strerror or exc}.") from None
    return Exported(target, replaced)
