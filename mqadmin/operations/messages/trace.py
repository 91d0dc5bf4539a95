"""queryMsgTraceById: the trace records of one message, read from the trace topic.

How this works (Apache's `QueryMsgTraceByIdSubCommand` and `TraceView`): trace messages are
indexed by their KEYS, which hold every traced message id, so a QUERY_MESSAGE for the id on
each broker of the trace topic's route finds them (64 at most per broker, as Apache asks).
Their bodies decode into records (`engine.protocol.trace`, any writer: Apache 4.9 and 5.x
clients, this engine's); the records of the id become rows, oldest first.  The client host
is the one a 5.x Pub record names, else the host that sent the trace message.  When nothing
is found and the id is an offset message id of one of the cluster's brokers, the message is
read from there and its traces are looked up under its message id (UNIQ_KEY), the id every
trace record carries: the usual msgId/offsetMsgId mix-up, resolved instead of refused.
A message a 5.x client sent through a gRPC proxy (its 5.x message id, or the ``__BORNHOST`` the
proxies stamp) has no trace records on Apache 5.3.3 or here: neither the proxies nor the 5.x
clients write any (5.3.3's trace types are the 4.x clients' plus Recall; its proxy's
``traceOn`` only answers remoting clients' TRACE_ON), so the error says that instead of
asking to turn tracing on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from engine.client.admin.broker import split_offset_msg_id
from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError, TopicNotExistError
from engine.protocol.message import MessageRecord
from engine.protocol.trace import (
    TRACE_TOPIC,
    EndTransactionRecord,
    PubRecord,
    RecallRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceRecord,
    decode,
)
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.messages.ids import is_v5_id
from mqadmin.operations.targets import route_brokers
from mqadmin.operations.times import format_time

Row = dict[str, Any]

MAX_NUM = 64  # Apache's queryMsgTraceById asks each broker for 64 messages
#: MessageConst.PROPERTY_BORN_HOST: set by a gRPC proxy on what a 5.x client sends
PROPERTY_BORN_HOST = "__BORNHOST"
TRACE_COLUMNS = ["type", "group", "clientHost", "time", "costMs", "status", "storeHost",
                 "topic", "tags", "keys", "retryTimes", "msgType", "msgId", "offsetMsgId",
                 "requestId", "timestamp"]
_ORDER = {"Pub": 0, "EndTransaction": 1, "SubBefore": 2, "SubAfter": 3, "Recall": 4}


@dataclass(frozen=True, slots=True)
class FoundTrace:
    """A record of the message and the trace message that carried it."""

    record: TraceRecord
    carrier: MessageRecord


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def _status(success: bool) -> str:
    return "success" if success else "failed"


def trace_row(found: FoundTrace, groups: dict[str, str | None],
              times: dict[str, int | None]) -> Row:
    """One record as a row; a SubAfter without group or time (an Alibaba Cloud writer's)
    takes them from the SubBefore of the same request."""
    r = found.record
    row: Row = {c: None for c in TRACE_COLUMNS}
    row.update(type=r.kind.value, msgId=r.msg_id, clientHost=_host(found.carrier.born_host))
    if isinstance(r, PubRecord):
        row.update(group=r.group, timestamp=r.timestamp, costMs=r.cost_ms,
                   status=_status(r.success), storeHost=r.store_host, topic=r.topic,
                   tags=r.tags, keys=r.keys, msgType=r.msg_type.name,
                   offsetMsgId=r.offset_msg_id, clientHost=r.client_host or row["clientHost"])
    elif isinstance(r, SubBeforeRecord):
        row.update(group=r.group, timestamp=r.timestamp, keys=r.keys,
                   retryTimes=r.retry_times, requestId=r.request_id)
    elif isinstance(r, SubAfterRecord):
        row.update(group=r.group or groups.get(r.request_id),
                   timestamp=r.timestamp if r.timestamp is not None else times.get(r.request_id),
                   costMs=r.cost_ms, status=_status(r.success), keys=r.keys,
                   requestId=r.request_id)
    elif isinstance(r, EndTransactionRecord):
        row.update(group=r.group, timestamp=r.timestamp, status=r.transaction_state,
                   storeHost=r.store_host, topic=r.topic, tags=r.tags, keys=r.keys,
                   msgType=r.msg_type.name)
    elif isinstance(r, RecallRecord):
        row.update(group=r.group, timestamp=r.timestamp, status=_status(r.success),
                   topic=r.topic)
    row["time"] = format_time(row["timestamp"])
    return row


def trace_rows(found: list[FoundTrace]) -> list[Row]:
    """The rows of `found`, oldest first (Pub, then each consumption before and after)."""
    befores = [f.record for f in found if isinstance(f.record, SubBeforeRecord)]
    groups: dict[str, str | None] = {b.request_id: b.group for b in befores}
    times: dict[str, int | None] = {b.request_id: b.timestamp for b in befores}
    rows = [trace_row(f, groups, times) for f in found]
    return sorted(rows, key=lambda r: (r["timestamp"] or 0, _ORDER.get(r["type"], 9)))


def records_of(msg_id: str, carriers: list[MessageRecord]) -> tuple[list[FoundTrace], int]:
    """The records about `msg_id` in the trace messages `carriers` (each read once), and how
    many malformed records were skipped."""
    found: list[FoundTrace] = []
    malformed = 0
    seen: set[tuple[str, int]] = set()
    for carrier in carriers:
        where = (_host(carrier.store_host), carrier.physical_offset)
        if where in seen:
            continue
        seen.add(where)
        decoded = decode(carrier.body)
        malformed += decoded.malformed
        found.extend(FoundTrace(r, carrier) for r in decoded.records if r.msg_id == msg_id)
    return found, malformed


async def _search(admin: MQAdmin, brokers: dict[str, str], topic: str, key: str
                  ) -> list[MessageRecord]:
    async def one(addr: str) -> list[MessageRecord]:
        result = await admin.broker.query_message(addr, topic, key, max_num=MAX_NUM)
        return result.messages

    lists = await asyncio.gather(*(one(a) for a in brokers.values()))
    return [m for messages in lists for m in messages]


async def _stored_message(admin: MQAdmin, msg_id: str) -> MessageRecord | None:
    """The message if `msg_id` is an offset message id naming one of the cluster's brokers
    (never a guessed address: a UNIQ_KEY also decodes as one)."""
    try:
        addr, _ = split_offset_msg_id(msg_id)
    except ValueError:
        return None
    info = await admin.namesrv.cluster_info()
    known = {a for data in info.broker_addr_table.values() for a in data.broker_addrs.values()}
    if addr not in known:
        return None
    try:
        return await admin.broker.view_message(addr, msg_id)
    except ClientError:
        return None


@dataclass(frozen=True, slots=True)
class TraceLookup:
    rows: list[Row]
    msg_id: str  # the id the records carry (the UNIQ_KEY of an offset id given)
    malformed: int


def sent_over_grpc(record: MessageRecord) -> bool:
    """Whether a 5.x client sent `record` through a gRPC proxy (never traced)."""
    return PROPERTY_BORN_HOST in record.properties()


async def query_trace(admin: MQAdmin, msg_id: str, trace_topic: str = TRACE_TOPIC,
                      record: MessageRecord | None = None) -> TraceLookup:
    """The trace rows of `msg_id` (a message id, or an offset message id); `record`, the
    message when the caller has it, says why there are none.

    Raises:
        TargetNotFound: the trace topic has no route, or no record names the message.
    """
    try:
        _, brokers = await route_brokers(admin, trace_topic)
    except TopicNotExistError:
        raise TargetNotFound(
            f"trace topic {trace_topic} does not exist: no broker has traceTopicEnable=true "
            "and no traced client wrote to it. Name another trace topic with -t, or enable "
            "traceTopicEnable on a broker.") from None
    found, malformed = records_of(msg_id, await _search(admin, brokers, trace_topic, msg_id))
    if found:
        return TraceLookup(trace_rows(found), msg_id, malformed)
    stored = record if record is not None else await _stored_message(admin, msg_id)
    if stored is not None and stored.msg_id != msg_id:
        key = stored.msg_id
        found, malformed = records_of(key, await _search(admin, brokers, trace_topic, key))
        if found:
            return TraceLookup(trace_rows(found), key, malformed)
    raise TargetNotFound(_no_trace(msg_id, trace_topic, sorted(brokers), stored))


def _no_trace(msg_id: str, topic: str, brokers: list[str], stored: MessageRecord | None
              ) -> str:
    where = f"no trace of message {msg_id} in {topic} (brokers {', '.join(brokers)})"
    if is_v5_id(msg_id) or (stored is not None and sent_over_grpc(stored)):
        exists = ("" if stored is None else f"; the message exists (topic {stored.topic}, "
                  f"stored {format_time(stored.store_timestamp)})")
        return (f"{where}{exists}: a 5.x client sent it through a gRPC proxy, and neither the "
                "proxies (Apache 5.3.3's or ours) nor the 5.x clients write trace records, "
                "whatever traceOn and traceTopicEnable say.")
    if stored is not None:
        return (f"{where}; the message exists (topic {stored.topic}, message id "
                f"{stored.msg_id}, stored {format_time(stored.store_timestamp)}) but its "
                "producer and consumers did not trace it: turn message trace on in the "
                "clients (enableMsgTrace), or name their trace topic with -t.")
    return (f"{where}. Trace records name the message id (UNIQ_KEY) a send returns; check "
            f"that the message exists with `mqadmin queryMsgByUniqueKey -i {msg_id} -t "
            "TOPIC`, that its clients trace (enableMsgTrace), and their trace topic (-t).")
