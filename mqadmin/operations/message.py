"""Message reads: queryMsgById/ByKey/ByUniqueKey/ByOffset, printMsg, printMsgByQueue,
consumeMessage, queryCq; and what goes with them (message tracks, consume directly, resend).

How this works: a message is found through the brokers' indexes (QUERY_MESSAGE by key or
unique key, on every broker of the topic's route), by its offset message id (which holds
the storing broker's address and commit-log offset: VIEW_MESSAGE_BY_ID), or by reading a
queue with pulls (`read_queue`: 32 messages a pull, nothing committed).  Every message
becomes the same row shape (`message_row`), so a message printed by any command looks the
same and ``-o json`` carries every field.
"""

from __future__ import annotations

import asyncio
import codecs
import time
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.broker_admin import message_store_addr, split_offset_msg_id
from engine.client.errors import (
    ClientError,
    ConsumerNotOnlineError,
    NoPermissionError,
    QueryNotFoundError,
    ServerSystemError,
    TopicNotExistError,
)
from engine.client.message import Message
from engine.client.results import PullStatus
from engine.protocol.body.heartbeat import ConsumeType
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from engine.protocol.perm import is_readable
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import (
    SYSTEM_PROPERTIES,
    producer,
    require_topic,
    send_row,
)
from mqadmin.operations.targets import (
    broker_addr_by_name,
    broker_names,
    check_queue_id,
    route_brokers,
)
from mqadmin.operations.times import format_time

Row = dict[str, Any]

DETAIL_COLUMNS = ("msgId", "offsetMsgId", "topic", "brokerName", "queueId", "queueOffset",
                  "commitLogOffset", "tags", "keys", "reconsumeTimes", "bornTime", "storeTime",
                  "bornHost", "storeHost", "sysFlag", "properties", "bodySize", "body", "tracks")
LIST_COLUMNS = ("brokerName", "queueId", "queueOffset", "msgId", "tags", "keys", "storeTime",
                "bodySize", "body")
KEY_COLUMNS = ("msgId", "brokerName", "queueId", "queueOffset", "tags", "keys", "storeTime")
TAG_COUNT_COLUMNS = ("tag", "count")
SEND_COLUMNS = ("brokerName", "queueId", "sendResult", "msgId", "offsetMsgId", "queueOffset")
RT_COLUMNS = ("brokerName", "queueId", "sendResult", "rtMs")
CQ_COLUMNS = ("index", "physicOffset", "physicSize", "tagsCode", "extendDataJson", "bitMap",
              "eval", "msg")
DIRECT_COLUMNS = ("clientId", "consumeResult", "remark", "spentTimeMillis", "order",
                  "autoCommit")
PULL_BATCH = 32
#: VIEW_MESSAGE_BY_ID's SYSTEM_ERROR remark when nothing is stored at the offset.
NO_MESSAGE_AT = "can not find message"


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


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def message_row(record: MessageRecord, *, charset: str | None = "UTF-8",
                broker_name: str | None = None, tracks: str | None = None) -> Row:
    """Every field of a stored message; the body decoded with `charset` (None: left out)."""
    props = record.properties()
    return {
        "msgId": record.msg_id, "offsetMsgId": record.offset_msg_id, "topic": record.topic,
        "brokerName": broker_name, "queueId": record.queue_id,
        "queueOffset": record.queue_offset, "commitLogOffset": record.physical_offset,
        "tags": record.tags, "keys": " ".join(record.keys) or None,
        "reconsumeTimes": record.reconsume_times,
        "bornTime": format_time(record.born_timestamp),
        "storeTime": format_time(record.store_timestamp),
        "bornHost": _host(record.born_host), "storeHost": _host(record.store_host),
        "sysFlag": record.sysflag, "properties": props, "bodySize": len(record.body),
        "body": record.body.decode(charset, "replace") if charset else None,
        "tracks": tracks,
    }


# ---------------------------------------------------------------------------- by id


@dataclass(frozen=True, slots=True)
class Found:
    """A message and the broker it was read from."""

    record: MessageRecord
    addr: str
    broker_name: str | None


async def _by_unique_key(admin: MQAdmin, topic: str, msg_id: str) -> list[Found]:
    _, brokers = await route_brokers(admin, topic)

    async def one(name: str, addr: str) -> list[Found]:
        try:
            found = await admin.broker.query_message_by_unique_key(addr, topic, msg_id)
        except QueryNotFoundError:
            return []
        return [Found(r, addr, name) for r in found]

    lists = await asyncio.gather(*(one(n, a) for n, a in brokers.items()))
    return sorted((f for found in lists for f in found),
                  key=lambda f: f.record.store_timestamp)


async def find_by_id(admin: MQAdmin, msg_id: str, topic: str | None = None) -> list[Found]:
    """The message with this id: an offset message id read from the broker it names, else
    (with `topic`) a unique key (UNIQ_KEY) looked up in the topic's brokers.

    Raises:
        TargetNotFound: no such message.
        UsageProblem: not an offset message id and no topic to look a unique key up in.
    """
    names = await broker_names(admin)
    try:
        addr, offset = split_offset_msg_id(msg_id)
    except ValueError:
        addr, offset = "", -1
    if addr and (addr in names or not topic):
        try:
            record = await admin.broker.view_message_at(addr, offset)
            return [Found(record, addr, names.get(addr))]
        except ServerSystemError as exc:
            if not topic and NO_MESSAGE_AT in exc.remark:  # Apache's remark for it
                raise TargetNotFound(
                    f"no message at commit-log offset {offset} of broker {addr} (id "
                    f"{msg_id}): it is older than the broker keeps (fileReservedTime), or "
                    "the id is wrong. Look the message up by key (`mqadmin queryMsgByKey`), "
                    "or pass -t TOPIC to try the id as a unique key.") from None
            if not topic:
                raise
        except ClientError:
            if not topic:
                raise
    if not topic:
        raise UsageProblem(f"{msg_id!r} is not an offset message id: pass -t TOPIC to look "
                           "it up as a unique key (UNIQ_KEY).")
    found = await _by_unique_key(admin, topic, msg_id)
    if not found:
        raise TargetNotFound(f"no message with id {msg_id} in topic '{topic}'. Check the id "
                             "and the topic (keys: `mqadmin queryMsgByKey`).")
    return found


async def tracks(admin: MQAdmin, found: Found) -> str:
    """For each group consuming the message's topic, whether it consumed the message
    (Apache's MessageTrack: CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, PULL,
    NOT_ONLINE, UNKNOWN)."""
    record = found.record
    try:
        groups = sorted((await admin.broker.topic_consumed_by(found.addr, record.topic)
                         ).group_list)
    except ClientError:
        return "UNKNOWN"
    if not groups:
        return "NO_CONSUMER"

    async def one(group: str) -> str:
        try:
            cc = await admin.consumer_connections(group)
        except (ConsumerNotOnlineError, TopicNotExistError):  # no retry topic: never online
            return f"{group}=NOT_ONLINE"
        except ClientError:
            return f"{group}=UNKNOWN"
        if cc.consume_type is ConsumeType.CONSUME_ACTIVELY:
            return f"{group}=PULL"
        try:
            stats = await admin.broker.consume_stats(found.addr, group, record.topic)
        except ClientError:
            return f"{group}=UNKNOWN"
        for mq, w in stats.offset_table.items():
            if mq.queue_id == record.queue_id and mq.topic == record.topic and (
                    found.broker_name is None or mq.broker_name == found.broker_name):
                if w.consumer_offset <= record.queue_offset:
                    return f"{group}=NOT_CONSUME_YET"
                sub = cc.subscription_table.get(record.topic)
                if sub is not None and not sub.is_sub_all and (record.tags or "") not in {
                        t.strip() for t in sub.sub_string.split("||")}:
                    return f"{group}=CONSUMED_BUT_FILTERED"
                return f"{group}=CONSUMED"
        return f"{group}=UNKNOWN"

    return ", ".join(await asyncio.gather(*(one(g) for g in groups)))


async def query_by_id(admin: MQAdmin, msg_ids: list[str], *, topic: str | None = None,
                      charset: str = "UTF-8", show_all: bool = True) -> list[Row]:
    """Every field of each message (and its consumption by each group)."""
    rows: list[Row] = []
    for msg_id in msg_ids:
        found = await find_by_id(admin, msg_id, topic)
        for f in found if show_all else found[:1]:
            rows.append(message_row(f.record, charset=charset, broker_name=f.broker_name,
                                    tracks=await tracks(admin, f)))
    return rows


async def consume_directly(admin: MQAdmin, group: str, client_id: str, msg_id: str,
                           topic: str | None = None) -> Row:
    """Have one online client consume the message again (CONSUME_MESSAGE_DIRECTLY through
    the broker that stored it)."""
    found = (await find_by_id(admin, msg_id, topic))[0]
    offset_id = found.record.offset_msg_id
    result = await admin.broker.consume_message_directly(
        message_store_addr(offset_id), group, client_id, offset_id)
    return {"clientId": client_id,
            "consumeResult": result.consume_result.name if result.consume_result else None,
            "remark": result.remark, "spentTimeMillis": result.spent_time_mills,
            "order": result.order, "autoCommit": result.auto_commit}


async def resend(admin: MQAdmin, msg_id: str, topic: str | None = None) -> Row:
    """Send a stored message again to its topic (body, tags, keys and user properties)."""
    record = (await find_by_id(admin, msg_id, topic))[0].record
    props = {k: v for k, v in record.properties().items() if k not in SYSTEM_PROPERTIES}
    msg = Message(record.topic, record.body, tags=record.tags, keys=record.keys,
                  flag=record.flag, properties=props)
    async with producer(admin) as p:
        return send_row(await p.send(msg))


# ---------------------------------------------------------------------------- by key


async def query_by_key(admin: MQAdmin, topic: str, key: str, *, begin: int = 0,
                       end: int = 2**63 - 1, max_num: int = 64) -> list[Row]:
    """The messages of `topic` with key `key`, from the index of every broker of its route.

    Raises:
        TopicNotExistError: no route.
    """
    _, brokers = await route_brokers(admin, topic)

    async def one(name: str, addr: str) -> list[Row]:
        try:
            result = await admin.broker.query_message(addr, topic, key, max_num=max_num,
                                                      begin=begin, end=end)
        except QueryNotFoundError:
            return []
        return [message_row(r, broker_name=name) for r in result.messages]

    lists = await asyncio.gather(*(one(n, a) for n, a in brokers.items()))
    rows = [r for rows in lists for r in rows]
    return sorted(rows, key=lambda r: (r["storeTime"] or "", r["brokerName"] or ""))[:max_num]


# ---------------------------------------------------------------------------- by queue


async def _read_entries(admin: MQAdmin, addr: str, mq: MessageQueue, offset: int, end: int,
                        subscription: str) -> tuple[list[MessageRecord], int]:
    """Messages by their consume-queue entries and commit-log offsets: admin requests, which
    a topic's permission does not forbid (older brokers made dead-letter topics write-only)."""
    body = await admin.broker.query_consume_queue(addr, mq.topic, mq.queue_id, offset,
                                                  min(PULL_BATCH, end - offset))
    records = [await admin.broker.view_message_at(addr, entry.physic_offset)
               for entry in body.queue_data if entry.physic_size > 0]
    wanted = _tags(subscription)
    return ([r for r in records if wanted is None or (r.tags or "") in wanted],
            offset + len(body.queue_data))


def _tags(subscription: str) -> frozenset[str] | None:
    if not subscription or subscription.strip() == "*":
        return None
    return frozenset(t.strip() for t in subscription.split("||") if t.strip())


async def read_queue(admin: MQAdmin, addr: str, mq: MessageQueue, start: int, end: int, *,
                     subscription: str = "*", limit: int | None = None) -> list[MessageRecord]:
    """The messages of one queue from offset `start` up to (not including) `end`: pulled,
    or read entry by entry when the topic may not be read (a dead-letter queue made
    write-only by an older broker)."""
    offset = start
    out: list[MessageRecord] = []
    readable = True
    while offset < end and (limit is None or len(out) < limit):
        if not readable:
            records, after = await _read_entries(admin, addr, mq, offset, end, subscription)
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
            out.extend(m for m in result.records if m.queue_offset < end)
        elif result.status is not PullStatus.NO_MATCHED_MSG:
            break
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return out if limit is None else out[:limit]


async def queue_bounds(admin: MQAdmin, addr: str, mq: MessageQueue, begin: int | None,
                       end: int | None) -> tuple[int, int]:
    """The offsets to read between: the queue's min and max, or those of the times given."""
    low = (await admin.broker.search_offset(addr, mq.topic, mq.queue_id, begin)
           if begin is not None else await admin.broker.min_offset(addr, mq.topic, mq.queue_id))
    high = (await admin.broker.search_offset(addr, mq.topic, mq.queue_id, end)
            if end is not None else await admin.broker.max_offset(addr, mq.topic, mq.queue_id))
    return low, high


def list_row(record: MessageRecord, broker_name: str, charset: str | None) -> Row:
    row = message_row(record, charset=charset, broker_name=broker_name)
    return {c: row[c] for c in LIST_COLUMNS}


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


async def print_msg(admin: MQAdmin, topic: str, *, charset: str = "UTF-8",
                    subscription: str = "*", begin: int | None = None, end: int | None = None,
                    print_body: bool = True, limit: int | None = None,
                    on_progress: Progress | None = None) -> list[Row]:
    """Every message of every queue of the topic (between two store times when given)."""
    queues = await readable_queues(admin, topic)
    rows: list[Row] = []
    for i, (mq, addr) in enumerate(queues):
        left = None if limit is None else limit - len(rows)
        if left is not None and left <= 0:
            break
        low, high = await queue_bounds(admin, addr, mq, begin, end)
        records = await read_queue(admin, addr, mq, low, high, subscription=subscription,
                                   limit=left)
        rows += [list_row(r, mq.broker_name, charset if print_body else None) for r in records]
        if on_progress is not None:
            on_progress(i + 1, len(queues))
    return rows


async def print_msg_by_queue(admin: MQAdmin, topic: str, broker_name: str, queue_id: int, *,
                             charset: str = "UTF-8", subscription: str = "*",
                             begin: int | None = None, end: int | None = None,
                             print_body: bool = False, count_tags: bool = False) -> list[Row]:
    """The messages of one queue, or with `count_tags` how many carry each tag (most first)."""
    await check_queue_id(admin, topic, broker_name, queue_id)
    addr = await broker_addr_by_name(admin, broker_name)
    mq = MessageQueue(topic, broker_name, queue_id)
    low, high = await queue_bounds(admin, addr, mq, begin, end)
    records = await read_queue(admin, addr, mq, low, high, subscription=subscription)
    if count_tags:
        counts: dict[str, int] = {}
        for r in records:
            if r.tags and r.tags.strip():
                counts[r.tags] = counts.get(r.tags, 0) + 1
        return [{"tag": t, "count": n} for t, n in sorted(counts.items(), key=lambda x: -x[1])]
    return [list_row(r, broker_name, charset if print_body else None) for r in records]


async def query_by_offset(admin: MQAdmin, topic: str, broker_name: str, queue_id: int,
                          offset: int, *, charset: str = "UTF-8") -> list[Row]:
    """The message at one queue offset, every field.

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
    found = Found(records[0], addr, broker_name)
    return [message_row(found.record, charset=charset, broker_name=broker_name,
                        tracks=await tracks(admin, found))]


async def consume_message(admin: MQAdmin, topic: str, *, broker_name: str | None = None,
                          queue_id: int | None = None, offset: int | None = None,
                          begin: int | None = None, end: int | None = None,
                          count: int = 128) -> list[Row]:
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
    rows: list[Row] = []
    for mq, addr in queues:
        if len(rows) >= count:
            break
        low, high = await queue_bounds(admin, addr, mq, begin, end)
        if offset is not None:
            low = max(low, offset)
        records = await read_queue(admin, addr, mq, low, high, limit=count - len(rows))
        rows += [list_row(r, mq.broker_name, "UTF-8") for r in records]
    return rows


# ---------------------------------------------------------------------------- sending


async def send_message(admin: MQAdmin, topic: str, body: bytes, *, keys: str | None = None,
                       tags: str | None = None, broker_name: str | None = None,
                       queue_id: int | None = None) -> Row:
    """Send one message (to a broker, or a queue of it, when named)."""
    if queue_id is not None and broker_name is None:
        raise UsageProblem("-i needs -b: name the broker of the queue.")
    await require_topic(admin, topic)
    msg = Message(topic, body, tags=tags, keys=keys)
    async with producer(admin) as p:
        if broker_name is None:
            return send_row(await p.send(msg))
        queues = [q for q in await p.fetch_publish_queues(topic)
                  if q.broker_name == broker_name and queue_id in (None, q.queue_id)]
        if not queues:
            where = f"broker '{broker_name}'" + (f" queue {queue_id}" if queue_id is not None
                                                 else "")
            raise TargetNotFound(f"{where} is not a writable queue of topic '{topic}' (see "
                                 f"`mqadmin topicRoute -t {topic}`).")
        return send_row(await p.send_to_queue(msg, queues[0]))


async def check_send_rt(admin: MQAdmin, topic: str, *, amount: int = 100, size: int = 128,
                        on_progress: Progress | None = None) -> tuple[list[Row], float]:
    """Send `amount` messages of `size` bytes round robin over the topic's writable queues
    and time each; the average leaves the first out, as Apache's checkMsgSendRT does."""
    await require_topic(admin, topic)
    body = b"a" * size
    rows: list[Row] = []
    async with producer(admin) as p:
        queues = await p.fetch_publish_queues(topic)
        for i in range(amount):
            mq = queues[i % len(queues)]
            started = time.perf_counter()
            try:
                sent = await p.send_to_queue(Message(topic, body), mq)
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "sendResult": sent.status.name,
                             "rtMs": round((time.perf_counter() - started) * 1000, 3)})
            except ClientError as exc:
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "sendResult": f"FAILED: {exc}", "rtMs": None})
            if on_progress is not None:
                on_progress(i + 1, amount)
    timed = [r["rtMs"] for r in rows[1:] if r["rtMs"] is not None]
    return rows, (sum(timed) / len(timed) if timed else 0.0)


# ---------------------------------------------------------------------------- queryCq


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
