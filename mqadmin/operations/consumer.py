"""Consumer and producer reads: consumerProgress (lag in messages and in time),
consumerConnection, consumerStatus, producerConnection, allocateMQ.

How this works: a group's progress is its consume stats from every broker that has its offsets
(`MQAdmin.consume_stats`): per queue the broker's max offset and the group's committed one;
their difference is the lag in messages (Apache's diff).  The lag in time is how long ago
the oldest unconsumed message was stored: the message at the committed offset is pulled
(one message, group TOOLS_CONSUMER, nothing committed) and its store time read.  Which
client holds a queue comes from each online client's running info, as Apache's
consumerProgress shows it; clients that do not answer are shown as "NA".

A read returns a frozen snapshot (`GroupProgress` with its `GroupClients`: the connection and
each client's running info, read once) that the CLI turns into its rows in one place
(`progress_rows`, `connection_rows`, `status_rows`) and the dashboard shows the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin.cluster import MQAdmin, merge_consume_stats
from engine.client.core.errors import (
    ClientError,
    GroupNotFoundError,
    ServerSystemError,
)
from engine.client.core.namesrv import ServerOutcome
from engine.client.core.results import PullStatus
from engine.protocol.body.admin import Connection, ConsumerConnection, ConsumerRunningInfo
from engine.protocol.body.heartbeat import GRPC_PROTOCOL, ConsumeType
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.version import version_desc
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.consume_stats import read_lags
from mqadmin.operations.mutation import Progress
from mqadmin.operations.targets import (
    known_groups,
    masters,
    route_brokers,
)
from mqadmin.operations.times import format_time

Row = dict[str, Any]

PROGRESS_COLUMNS = ("topic", "brokerName", "queueId", "brokerOffset", "consumerOffset",
                    "clientIP", "diff", "inflight", "lagMs", "oldestUnconsumed", "lastTime")
GROUPS_COLUMNS = ("group", "count", "version", "type", "model", "tps", "diffTotal")
CONNECTION_COLUMNS = ("clientId", "clientAddr", "language", "version", "protocol", "consumeType",
                      "messageModel", "consumeFromWhere", "subscriptions")
STATUS_COLUMNS = ("clientId", "version", "subscriptions", "queues", "pullTPS", "consumeOkTPS",
                  "consumeFailedTPS", "consumeFailedMsgs", "error")
CLIENT_QUEUE_COLUMNS = ("topic", "brokerName", "queueId", "commitOffset", "cachedMsgCount",
                        "cachedMsgMinOffset", "cachedMsgMaxOffset", "cachedMsgSizeMiB",
                        "locked", "dropped", "lastPullTime", "lastConsumeTime")
PRODUCER_COLUMNS = ("clientId", "clientAddr", "language", "version", "protocol")
ALLOCATE_COLUMNS = ("clientId", "topic", "brokerName", "queueId")
TOTAL = "(total)"
#: Seconds to wait for a client's running info in consumerProgress (the rest goes on).
RUNNING_INFO_TIMEOUT = 3.0
CONCURRENCY = 16
#: Groups whose clients consumerProgress (every group) asks for at once.
LIST_CONCURRENCY = 64


async def running_info(admin: MQAdmin, group: str, client_id: str, *, jstack: bool = False,
                       timeout: float | None = None,
                       seen: list[ServerOutcome[ConsumerConnection]] | None = None
                       ) -> ConsumerRunningInfo:
    """A client's running info, relayed by a broker the client is connected to (any broker
    when none says so); `seen` is the group's connections as read before.

    Raises:
        ClientError: no broker could relay it (the last one's error).
    """
    outcomes = seen if seen is not None else await admin.group_connections(group)
    holding = [o.addr for o in outcomes if o.value is not None
               and any(c.client_id == client_id for c in o.value.connection_set)]
    error: ClientError | None = None
    for addr in holding + [o.addr for o in outcomes if o.addr not in holding]:
        try:
            return await admin.broker.consumer_running_info(addr, group, client_id,
                                                            jstack=jstack, timeout=timeout)
        except ClientError as exc:
            error = exc
    if error is None:
        raise TargetNotFound(f"group '{group}' has no broker to relay the call to")
    raise error


#: Why a 5.x client's running info is not asked for (`silent_grpc`).
GRPC_NO_RUNNING_INFO = ("no running info: a 5.x client through Apache's gRPC proxy, which "
                        "does not answer for it (a 5.x client holds no queues)")


@dataclass(frozen=True, slots=True)
class GroupClients:
    """A group's online clients as read once: its connection (None when no client is online
    or no broker answered) and each client's running info, or why it could not be read."""

    connection: ConsumerConnection | None
    running: Mapping[str, ConsumerRunningInfo] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def conns(self) -> list[Connection]:
        """The connected clients, sorted by client id."""
        found = self.connection.connection_set if self.connection is not None else ()
        return sorted(found, key=lambda c: c.client_id)

    def holders(self) -> dict[MessageQueue, str]:
        """The client IP holding each queue, from the running infos that were read."""
        return {mq: conn.client_addr.rsplit(":", 1)[0] for conn in self.conns
                if (info := self.running.get(conn.client_id)) is not None
                for mq in info.mq_table}


async def read_clients(admin: MQAdmin, group: str, *, timeout: float | None = None
                       ) -> GroupClients:
    """The group's connection and the running info of each of its clients, asked in
    parallel (each within `timeout` seconds, when given).

    Raises:
        ConsumerNotOnlineError: no client of the group is connected.
        GroupNotFoundError: no broker knows the group.
    """
    seen = await admin.group_connections(group)
    connection = await admin.consumer_connections(group, seen)
    conns = sorted(connection.connection_set, key=lambda c: c.client_id)

    async def one(conn: Connection) -> ConsumerRunningInfo | str:
        if silent_grpc(conn):
            return GRPC_NO_RUNNING_INFO
        try:
            return await running_info(admin, group, conn.client_id, timeout=timeout,
                                      seen=seen)
        except ClientError as exc:
            return str(exc)

    found = await asyncio.gather(*(one(c) for c in conns))
    return GroupClients(
        connection,
        {c.client_id: i for c, i in zip(conns, found, strict=True) if not isinstance(i, str)},
        {c.client_id: i for c, i in zip(conns, found, strict=True) if isinstance(i, str)})


def silent_grpc(conn: Connection) -> bool:
    """A 5.x client registered by a proxy that does not say its protocol (Apache 5.3's):
    that proxy leaves a running-info request unanswered until the broker gives up."""
    return not conn.protocol and protocol_of(conn) == GRPC_PROTOCOL


async def _clients_if_online(admin: MQAdmin, group: str) -> GroupClients:
    try:
        return await read_clients(admin, group, timeout=RUNNING_INFO_TIMEOUT)
    except ClientError:
        return GroupClients(None)


async def _oldest_store_time(admin: MQAdmin, addr: str, mq: MessageQueue,
                             offset: int) -> int | None:
    try:
        result = await admin.broker.pull_records(addr, mq, offset, max_nums=1)
    except ClientError:
        return None
    if result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
        return await _oldest_store_time(admin, addr, mq, result.next_begin_offset)
    return result.records[0].store_timestamp if result.records else None


def group_not_found(group: str) -> TargetNotFound:
    """The error for a group no broker knows (`GroupNotFoundError`)."""
    return TargetNotFound(f"group '{group}' does not exist on any broker (no broker keeps its "
                          "config, offsets or a client of it). List the groups with `mqadmin "
                          "consumerProgress`; create one with `mqadmin updateSubGroup`.")


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a group: the broker's max offset, the group's committed one, the store
    time of the last consumed message and of the oldest unconsumed one (None when unread)."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    oldest_stored: int | None
    #: 5.x: read (POP: popped) but not yet acknowledged; 0 where the broker says nothing.
    in_flight: int = 0

    @property
    def diff(self) -> int:
        """Not yet consumed: ready, and in flight."""
        return self.broker_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """A group's progress as read once: its queues, consume TPS and online clients, and
    when it was read (ms; the lag in time is measured from then)."""

    group: str
    queues: tuple[QueueProgress, ...]
    consume_tps: float
    clients: GroupClients
    read_at: int

    @property
    def topics(self) -> list[str]:
        """The topics it consumes (not its retry or dead-letter topic), sorted."""
        return sorted({q.mq.topic for q in self.queues if not q.mq.topic.startswith("%")})


async def read_progress(admin: MQAdmin, group: str, topic: str | None = None
                        ) -> GroupProgress:
    """The group's consume stats from every broker of its route, the store time of each
    lagging queue's oldest unconsumed message, and its online clients with their running
    info (each read once).

    Raises:
        TargetNotFound: no broker knows the group.
        TopicNotExistError: `topic` does not exist.
    """
    try:
        outcomes = await admin.consume_stats(group, topic)
    except GroupNotFoundError:
        raise group_not_found(group) from None
    for outcome in outcomes:
        if outcome.error is not None and all(o.error is not None for o in outcomes):
            raise outcome.error
    stats = merge_consume_stats(outcomes)
    addr_of = await masters(admin, or_slave=True)
    gate = asyncio.Semaphore(CONCURRENCY)
    now = int(time.time() * 1000)

    async def oldest(mq: MessageQueue, broker_offset: int, consumer_offset: int) -> int | None:
        if broker_offset <= consumer_offset:
            return None
        addr = addr_of.get(mq.broker_name)
        if addr is None:
            return None
        async with gate:
            return await _oldest_store_time(admin, addr, mq, consumer_offset)

    queues = list(stats.offset_table.items())
    clients, stored = await asyncio.gather(
        _clients_if_online(admin, group),
        asyncio.gather(*(oldest(mq, w.broker_offset, w.consumer_offset) for mq, w in queues)))
    return GroupProgress(
        group, tuple(QueueProgress(mq, w.broker_offset, w.consumer_offset, w.last_timestamp, s,
                                   max((w.pull_offset or 0) - w.consumer_offset, 0))
                     for (mq, w), s in zip(queues, stored, strict=True)),
        stats.consume_tps, clients, now)


def progress_rows(progress: GroupProgress) -> list[Row]:
    """consumerProgress's rows (PROGRESS_COLUMNS): per queue its offsets, the client holding
    it, the lag in messages (diff; of which inflight were read, as 5.3 shows it, or popped
    and not yet acknowledged) and in time (lagMs: since the oldest unconsumed message
    was stored), the store time of the last consumed message; then a total row."""
    holders = progress.clients.holders()
    now = progress.read_at
    rows: list[Row] = []
    for q in progress.queues:
        diff, stored = q.diff, q.oldest_stored
        rows.append({"topic": q.mq.topic, "brokerName": q.mq.broker_name,
                     "queueId": q.mq.queue_id, "brokerOffset": q.broker_offset,
                     "consumerOffset": q.consumer_offset,
                     "clientIP": holders.get(q.mq, "NA"), "diff": diff,
                     "inflight": q.in_flight,
                     "lagMs": (max(now - stored, 0) if stored else None) if diff > 0 else 0,
                     "oldestUnconsumed": format_time(stored) if diff > 0 else None,
                     "lastTime": format_time(q.last_timestamp)})
    lags = [r["lagMs"] for r in rows if r["lagMs"] is not None]
    stored_times = [q.oldest_stored for q in progress.queues if q.oldest_stored]
    rows.append({"topic": TOTAL, "brokerName": None, "queueId": None,
                 "brokerOffset": sum(q.broker_offset for q in progress.queues),
                 "consumerOffset": sum(q.consumer_offset for q in progress.queues),
                 "clientIP": None, "diff": sum(r["diff"] for r in rows),
                 "inflight": sum(q.in_flight for q in progress.queues),
                 "lagMs": max(lags) if lags else None,
                 "oldestUnconsumed": format_time(min(stored_times)) if stored_times else None,
                 "lastTime": None})
    return rows


async def group_list(admin: MQAdmin, on_progress: Progress | None = None) -> list[Row]:
    """Every group the brokers know (`known_groups`: Apache lists those with a
    ``%RETRY%<group>`` topic, which a 5.x POP group lacks), as Apache lists them: clients,
    lowest client version, PULL/PUSH/POP, message model, TPS, total diff.

    The TPS and diff of every group come from one GET_BROKER_CONSUME_STATS per broker (the
    same offsets Apache's per-group consume stats add up; when a broker does not answer it,
    each group's consume stats are read from its route instead, as before); only the clients
    are asked per group (no request lists a broker's online groups), `LIST_CONCURRENCY` at a
    time."""
    groups, info = await asyncio.gather(known_groups(admin), admin.namesrv.cluster_info())
    addrs = list((await masters(admin, info=info, or_slave=True)).values())
    lags = await read_lags(admin, addrs)
    diff: dict[str, int] = defaultdict(int)
    group_tps: dict[str, float] = defaultdict(float)
    if lags.failed:
        totals = await _group_totals(admin, groups)
        diff.update((g, d) for g, (d, _) in totals.items())
        group_tps.update((g, t) for g, (_, t) in totals.items())
    else:
        tps: dict[tuple[str, str, str], float] = {}  # one per (group, topic, broker)
        for lag in lags.rows:
            diff[lag.group] += lag.broker_offset - lag.consumer_offset
            tps[(lag.group, lag.topic, lag.broker_name)] = lag.group_tps
        for (group, _, _), value in tps.items():
            group_tps[group] += value
    online = await online_consumers(admin, addrs, groups, concurrency=LIST_CONCURRENCY,
                                    on_progress=on_progress)
    rows: list[Row] = []
    for group in groups:
        row: Row = {"group": group, "count": 0, "version": "OFFLINE", "type": None,
                    "model": None, "tps": round(group_tps.get(group, 0.0), 2),
                    "diffTotal": diff.get(group, 0)}
        cc = online.get(group)
        if cc is not None and cc.connection_set:
            # Apache 5.3 calls a POP group PUSH here; this console says POP.
            pulled = cc.consume_type is ConsumeType.CONSUME_ACTIVELY
            row |= {"count": len(cc.connection_set), "version": version_desc(
                cc.compute_min_version()),
                "type": cc.consume_type.type_cn if cc.consume_type else "PULL",
                "model": cc.message_model.name if not pulled and cc.message_model else None}
        rows.append(row)
    return rows


async def _group_totals(admin: MQAdmin, groups: Sequence[str]
                        ) -> dict[str, tuple[int, float]]:
    """Each group's total diff and consume TPS from its route's brokers (a group none
    answers for is left out)."""
    gate = asyncio.Semaphore(LIST_CONCURRENCY)

    async def one(group: str) -> tuple[int, float] | None:
        async with gate:
            try:
                stats = merge_consume_stats(await admin.consume_stats(group))
            except ClientError:
                return None
        return stats.compute_total_diff(), stats.consume_tps

    found = await asyncio.gather(*(one(g) for g in groups))
    return {g: t for g, t in zip(groups, found, strict=True) if t is not None}


async def consumer_connection(admin: MQAdmin, group: str) -> ConsumerConnection:
    """The group's connected clients, with the group's subscriptions and settings.

    Raises:
        ConsumerNotOnlineError: no client of the group is connected.
        TargetNotFound: no broker knows the group.
    """
    try:
        return await admin.consumer_connections(group)
    except GroupNotFoundError:
        raise group_not_found(group) from None


async def online_consumers(admin: MQAdmin, addrs: Sequence[str], groups: Sequence[str], *,
                           concurrency: int = CONCURRENCY, on_progress: Progress | None = None
                           ) -> dict[str, ConsumerConnection | None]:
    """Each group's online clients as the first broker of `addrs` that has any sees them
    (None: no client online there, or no broker answered), `concurrency` groups at a time."""
    gate = asyncio.Semaphore(concurrency)
    finished = 0

    async def one(group: str) -> ConsumerConnection | None:
        nonlocal finished
        try:
            async with gate:
                for addr in addrs:
                    try:
                        return await admin.broker.consumer_connections(addr, group)
                    except ClientError:  # not online there, or the broker is away
                        continue
            return None
        finally:
            finished += 1
            if on_progress is not None:
                on_progress(finished, len(groups))

    found = await asyncio.gather(*(one(g) for g in groups))
    return dict(zip(groups, found, strict=True))


def protocol_of(c: Connection) -> str:
    """How a client reaches the cluster: "gRPC" when this engine's proxy registered it (it
    says so); Apache's proxy does not say, but a 5.x client's id (host@pid@index@time, three
    "@" where a remoting client's has one or two) gives it away; otherwise "remoting"."""
    if c.protocol:
        return c.protocol
    return GRPC_PROTOCOL if c.client_id.count("@") == 3 else "remoting"


def connection_rows(cc: ConsumerConnection | None) -> list[Row]:
    """consumerConnection's rows (CONNECTION_COLUMNS), one per client, sorted by id."""
    if cc is None:
        return []
    subs = "; ".join(f"{t}:{s.sub_string}" for t, s in sorted(cc.subscription_table.items()))
    return [{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language.name,
             "version": version_desc(c.version), "protocol": protocol_of(c),
             "consumeType": cc.consume_type.name if cc.consume_type else None,
             "messageModel": cc.message_model.name if cc.message_model else None,
             "consumeFromWhere": cc.consume_from_where.name if cc.consume_from_where else None,
             "subscriptions": subs}
            for c in sorted(cc.connection_set, key=lambda c: c.client_id)]


def _subs(info: ConsumerRunningInfo) -> str:
    return "; ".join(sorted(f"{s.topic}:{s.sub_string}" for s in info.subscription_set))


def status_rows(clients: GroupClients) -> tuple[list[Row], bool]:
    """consumerStatus's rows (STATUS_COLUMNS): each online client's running info in brief;
    and whether every client subscribes the same (Apache's consumerStatus checks it)."""
    rows: list[Row] = []
    subscriptions: set[str] = set()
    for conn in clients.conns:
        row: Row = {"clientId": conn.client_id, "version": version_desc(conn.version)}
        info = clients.running.get(conn.client_id)
        if info is None:
            rows.append(row | {"error": clients.errors.get(conn.client_id)})
            continue
        status = list(info.status_table.values())
        subscriptions.add(_subs(info))
        rows.append(row | {
            "subscriptions": _subs(info), "queues": len(info.mq_table),
            "pullTPS": round(sum(s.pull_tps for s in status), 2),
            "consumeOkTPS": round(sum(s.consume_ok_tps for s in status), 2),
            "consumeFailedTPS": round(sum(s.consume_failed_tps for s in status), 2),
            "consumeFailedMsgs": sum(s.consume_failed_msgs for s in status), "error": None})
    return rows, len(subscriptions) <= 1


async def client_status(admin: MQAdmin, group: str, client_id: str, *, jstack: bool = False
                        ) -> tuple[list[Row], ConsumerRunningInfo]:
    """One client's queues as it reports them (process-queue state per queue), and its whole
    running info (properties, jstack)."""
    info = await running_info(admin, group, client_id, jstack=jstack)
    rows = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
             "commitOffset": pq.commit_offset, "cachedMsgCount": pq.cached_msg_count,
             "cachedMsgMinOffset": pq.cached_msg_min_offset,
             "cachedMsgMaxOffset": pq.cached_msg_max_offset,
             "cachedMsgSizeMiB": pq.cached_msg_size_in_mib, "locked": pq.locked,
             "dropped": pq.droped, "lastPullTime": format_time(pq.last_pull_timestamp),
             "lastConsumeTime": format_time(pq.last_consume_timestamp)}
            for mq, pq in sorted(info.mq_table.items())]
    return rows, info


async def producer_connection(admin: MQAdmin, group: str, topic: str) -> list[Row]:
    """The producer group's connected clients, from the first broker of the topic's route
    (producers heartbeat to every broker).

    Raises:
        TopicNotExistError: no route for the topic.
        TargetNotFound: no broker knows a producer of the group.
    """
    _, brokers = await route_brokers(admin, topic)
    for addr in brokers.values():
        try:
            pc = await admin.broker.producer_connections(addr, group)
        except ServerSystemError:
            continue
        return [{"clientId": c.client_id, "clientAddr": c.client_addr,
                 "language": c.language.name, "version": version_desc(c.version),
                 "protocol": protocol_of(c)}
                for c in sorted(pc.connection_set, key=lambda c: c.client_id)]
    raise TargetNotFound(f"no producer of group '{group}' is connected to the brokers of "
                         f"topic '{topic}'. Check the group name and that the producer runs.")


def allocate_averagely(mq_all: list[MessageQueue], cid_all: list[str],
                       current: str) -> list[MessageQueue]:
    """Java's `AllocateMessageQueueAveragely.allocate`."""
    if current not in cid_all or not mq_all:
        return []
    index = cid_all.index(current)
    mod = len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        average = 1
    elif mod > 0 and index < mod:
        average = len(mq_all) // len(cid_all) + 1
    else:
        average = len(mq_all) // len(cid_all)
    start = index * average if mod > 0 and index < mod else index * average + mod
    span = min(average, len(mq_all) - start)
    return [mq_all[(start + i) % len(mq_all)] for i in range(span)]


async def allocate_mq(admin: MQAdmin, topic: str, client_ids: list[str]) -> list[Row]:
    """Which queues each client would get from the default (averagely) strategy: the
    topic's readable queues and the clients, both sorted, as a rebalance does.

    Raises:
        TopicNotExistError: no route.
    """
    route = await admin.namesrv.topic_route(topic)
    mq_all = sorted(MessageQueue(topic, q.broker_name, i) for q in route.queue_datas
                    if q.perm & 0x4 for i in range(q.read_queue_nums))
    cid_all = sorted(set(client_ids))
    return [{"clientId": cid, "topic": mq.topic, "brokerName": mq.broker_name,
             "queueId": mq.queue_id}
            for cid in cid_all for mq in allocate_averagely(mq_all, cid_all, cid)]
