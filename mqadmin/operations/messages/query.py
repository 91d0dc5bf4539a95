"""Finding messages: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, as
snapshots; and the rows every message command prints, made here and only here.

How this works: a message is found through the brokers' indexes (QUERY_MESSAGE by key or
unique key, on every broker of the topic's route), by its offset message id (which holds
the storing broker's address and commit-log offset: VIEW_MESSAGE_BY_ID), or by reading a
queue (scan.py).  Any id is resolved by ids.py.  A lookup returns frozen
snapshots (`StoredMessage`, `MessageDetail` with the message's `Track` in each consuming
group; scan.py's `MessagePage` and `TagCount`); the CLI and the dashboard turn them
into rows with `message_row`, `detail_rows`, `list_rows` and `tag_count_rows`, so a message
printed by any command looks the same and ``-o json`` carries every field.
"""

from __future__ import annotations

import asyncio
import codecs
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import (
    ClientError,
    ConsumerNotOnlineError,
    QueryNotFoundError,
    TopicNotExistError,
)
from engine.protocol.body.heartbeat import ConsumeType
from engine.protocol.body.message_queue import MessageQueue
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.messages.ids import StoredMessage, find_by_id
from mqadmin.operations.messages.scan import TagCount, read_queue
from mqadmin.operations.targets import broker_addr_by_name, check_queue_id, route_brokers
from mqadmin.operations.times import format_time

Row = dict[str, Any]

DETAIL_COLUMNS = ("msgId", "offsetMsgId", "topic", "brokerName", "queueId", "queueOffset",
                  "commitLogOffset", "tags", "keys", "reconsumeTimes", "bornTime", "storeTime",
                  "bornHost", "storeHost", "sysFlag", "properties", "bodySize", "body", "tracks")
LIST_COLUMNS = ("brokerName", "queueId", "queueOffset", "msgId", "tags", "keys", "storeTime",
                "bodySize", "body")
KEY_COLUMNS = ("msgId", "brokerName", "queueId", "queueOffset", "tags", "keys", "storeTime")
TAG_COUNT_COLUMNS = ("tag", "count")
#: Apache's MessageTrack types, and ours for a group the broker could not say anything about.
CONSUMED = "CONSUMED"
CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
NOT_CONSUME_YET = "NOT_CONSUME_YET"
PULL = "PULL"
NOT_ONLINE = "NOT_ONLINE"
UNKNOWN = "UNKNOWN"


def check_charset(name: str | None) -> str:
    """A Java charset name Python knows (UTF-8, GBK, ISO-8859-1, ...).

    Raises:
        UsageProblem: an unknown charset.
    """
    charset = (name or "UTF-8").strip()
    try:
        codecs.lookup(charset)
    except LookupError:
        raise UsageProblem(f"unknown charset {charset!r}: use e.g. UTF-8 or GBK.") from None
    return charset


# ---------------------------------------------------------------------------- snapshots


@dataclass(frozen=True, slots=True)
class Track:
    """Whether one group consuming the message's topic consumed it (Apache's MessageTrack)."""

    group: str
    status: str  # CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, PULL, NOT_ONLINE, UNKNOWN


@dataclass(frozen=True, slots=True)
class MessageDetail:
    """A message and, for each group consuming its topic, whether it consumed it; `tracks`
    is None when the broker could not say which groups consume the topic."""

    message: StoredMessage
    tracks: tuple[Track, ...] | None

    def tracks_text(self) -> str:
        if self.tracks is None:
            return UNKNOWN
        if not self.tracks:
            return "NO_CONSUMER"
        return ", ".join(f"{t.group}={t.status}" for t in self.tracks)


# ---------------------------------------------------------------------------- rows


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def message_row(m: StoredMessage, *, charset: str | None = "UTF-8",
                tracks: str | None = None) -> Row:
    """Every field of a stored message; the body decoded with `charset` (None: left out)."""
    record = m.record
    return {
        "msgId": record.msg_id, "offsetMsgId": record.offset_msg_id, "topic": record.topic,
        "brokerName": m.broker_name, "queueId": record.queue_id,
        "queueOffset": record.queue_offset, "commitLogOffset": record.physical_offset,
        "tags": record.tags, "keys": " ".join(record.keys) or None,
        "reconsumeTimes": record.reconsume_times,
        "bornTime": format_time(record.born_timestamp),
        "storeTime": format_time(record.store_timestamp),
        "bornHost": _host(record.born_host), "storeHost": _host(record.store_host),
        "sysFlag": record.sysflag, "properties": record.properties(),
        "bodySize": len(record.body),
        "body": record.body.decode(charset, "replace") if charset else None,
        "tracks": tracks,
    }


def detail_rows(details: list[MessageDetail], charset: str = "UTF-8") -> list[Row]:
    """queryMsgById's, queryMsgByUniqueKey's and queryMsgByOffset's rows (DETAIL_COLUMNS)."""
    return [message_row(d.message, charset=charset, tracks=d.tracks_text()) for d in details]


def list_rows(messages: tuple[StoredMessage, ...] | list[StoredMessage],
              charset: str | None = None) -> list[Row]:
    """printMsg's, printMsgByQueue's and queryMsgByKey's rows (every field; LIST_COLUMNS or
    KEY_COLUMNS in a table); bodies only with a `charset`."""
    return [message_row(m, charset=charset) for m in messages]


def tag_count_rows(counts: list[TagCount]) -> list[Row]:
    return [{"tag": c.tag, "count": c.count} for c in counts]


# ---------------------------------------------------------------------------- tracks


async def _track(admin: MQAdmin, found: StoredMessage, group: str) -> Track:
    record = found.record
    try:
        cc = await admin.consumer_connections(group)
    except (ConsumerNotOnlineError, TopicNotExistError):  # no retry topic: never online
        return Track(group, NOT_ONLINE)
    except ClientError:
        return Track(group, UNKNOWN)
    if cc.consume_type is ConsumeType.CONSUME_ACTIVELY:
        return Track(group, PULL)
    try:
        stats = await admin.broker.consume_stats(found.addr, group, record.topic)
    except ClientError:
        return Track(group, UNKNOWN)
    for mq, w in stats.offset_table.items():
        if mq.queue_id == record.queue_id and mq.topic == record.topic and (
                found.broker_name is None or mq.broker_name == found.broker_name):
            if w.consumer_offset <= record.queue_offset:
                return Track(group, NOT_CONSUME_YET)
            sub = cc.subscription_table.get(record.topic)
            if sub is not None and not sub.is_sub_all and (record.tags or "") not in {
                    t.strip() for t in sub.sub_string.split("||")}:
                return Track(group, CONSUMED_BUT_FILTERED)
            return Track(group, CONSUMED)
    return Track(group, UNKNOWN)


async def detail(admin: MQAdmin, found: StoredMessage) -> MessageDetail:
    """The message and, for each group consuming its topic, whether it consumed it."""
    try:
        groups = sorted((await admin.broker.topic_consumed_by(found.addr, found.record.topic)
                         ).group_list)
    except ClientError:
        return MessageDetail(found, None)
    tracks = await asyncio.gather(*(_track(admin, found, g) for g in groups))
    return MessageDetail(found, tuple(tracks))


# ---------------------------------------------------------------------------- lookups


async def query_by_id(admin: MQAdmin, msg_ids: list[str], *, topic: str | None = None,
                      show_all: bool = True) -> list[MessageDetail]:
    """Each message by its id (offset message id or unique key: ids.py) with its
    tracks; every stored copy of a unique key with `show_all`, else the first.

    Raises:
        UsageProblem: a text that cannot be an id.
        NotAMessageId: an id that finds no message.
    """
    out: list[MessageDetail] = []
    for msg_id in msg_ids:
        found = await find_by_id(admin, msg_id, topic)
        out += [await detail(admin, f) for f in (found if show_all else found[:1])]
    return out


async def query_by_key(admin: MQAdmin, topic: str, key: str, *, begin: int = 0,
                       end: int = 2**63 - 1, max_num: int = 64) -> list[StoredMessage]:
    """The messages of `topic` with key `key`, from the index of every broker of its route,
    oldest first.

    Raises:
        TopicNotExistError: no route.
    """
    _, brokers = await route_brokers(admin, topic)

    async def one(name: str, addr: str) -> list[StoredMessage]:
        try:
            result = await admin.broker.query_message(addr, topic, key, max_num=max_num,
                                                      begin=begin, end=end)
        except QueryNotFoundError:
            return []
        return [StoredMessage(r, addr, name) for r in result.messages]

    lists = await asyncio.gather(*(one(n, a) for n, a in brokers.items()))
    found = [m for ms in lists for m in ms]
    return sorted(found, key=lambda m: (m.record.store_timestamp, m.broker_name or ""))[
        :max_num]


async def query_by_offset(admin: MQAdmin, topic: str, broker_name: str, queue_id: int,
                          offset: int) -> MessageDetail:
    """The message at one queue offset, with its tracks.

    Raises:
        TargetNotFound: no message there.
        UsageProblem: the queue is not one of the route's.
    """
    await check_queue_id(admin, topic, broker_name, queue_id)
    addr = await broker_addr_by_name(admin, broker_name)
    records = await read_queue(admin, addr, MessageQueue(topic, broker_name, queue_id), offset,
                               offset + 1)
    if not records:
        raise TargetNotFound(f"no message at offset {offset} of {topic}/{broker_name}/"
                             f"{queue_id}; see the queue's offsets with `mqadmin topicStatus "
                             f"-t {topic}`.")
    return await detail(admin, StoredMessage(records[0], addr, broker_name))
