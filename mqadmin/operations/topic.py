"""Topic operations: topicList, topicRoute, topicStatus, topicClusterList, and the
mutations updateTopic, deleteTopic, updateTopicPerm, updateOrderConf.

How this works: a topic lives on brokers (its config, queues and offsets) and in the name
servers' routes (rebuilt from the brokers' registrations).  Mutations therefore read the
broker's own topic table (GET_ALL_TOPIC_CONFIG) to plan and verify; deleteTopic deletes on
the cluster's masters first (as Apache's does), then on their slaves (Apache's skips them),
then on every name server, in that order, so neither a registration nor a promotion can
bring it back.
Ordered topics keep their broker/queue layout as a KV item in the name servers (namespace
ORDER_TOPIC_CONFIG).
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError, NotFoundError, ServerError, TopicNotExistError
from engine.protocol.body.admin import TopicOffset
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import TopicRouteData
from engine.protocol.body.topic import TopicConfig
from engine.protocol.perm import PERM_READ, PERM_RW, PERM_WRITE, perm_to_string
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.mutation import Gathered, Mutation, Progress, failures_of
from mqadmin.operations.targets import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    cluster_brokers,
    masters,
    refuse_slave,
    route_brokers,
)
from mqadmin.operations.times import format_time
from mqadmin.operations.topic_attributes import (
    ATTRIBUTE_COLUMNS,
    attribute_index,
    expected_attributes,
    message_type_cell,
    refuse_without_attributes,
    show_attributes,
)

Row = dict[str, Any]

ORDER_NAMESPACE = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
FLAG_UNIT = 0x1  # TopicSysFlag
FLAG_UNIT_SUB = 0x2
VALID_PERMS = (PERM_WRITE, PERM_READ, PERM_RW)
#: Brokers asked at once for the groups of each topic (topicList -c).
CONCURRENCY = 16

TOPIC_COLUMNS = ("topic",)
TOPIC_CLUSTER_COLUMNS = ("cluster", "topic", "group")
ROUTE_COLUMNS = ("topic", "cluster", "brokerName", "brokerId", "addr", "readQueueNums",
                 "writeQueueNums", "perm", "topicSysFlag", "messageType")
STATUS_COLUMNS = ("topic", "brokerName", "queueId", "minOffset", "maxOffset", "lastUpdated")
CLUSTER_OF_COLUMNS = ("topic", "cluster")
ORDER_CONF_COLUMNS = ("nameServer", "topic", "orderConf")


def check_topic_name(topic: str) -> str:
    """`topic` stripped, if brokers will accept it as a name.

    Raises:
        UsageProblem: empty, too long, or with characters outside ``%|a-zA-Z0-9_-``.
    """
    name = topic.strip()
    if not name or len(name) > MAX_TOPIC_LENGTH or not TOPIC_NAME.match(name):
        raise UsageProblem(f"invalid topic name {topic!r}: use 1-{MAX_TOPIC_LENGTH} of the "
                           "characters a-z A-Z 0-9 _ - % |.")
    return name


# ---------------------------------------------------------------------------- reads


async def topic_list(admin: MQAdmin, *, with_cluster: bool = False,
                     with_attributes: bool = False,
                     on_progress: Progress | None = None) -> list[Row]:
    """Every topic; with `with_cluster`, one row per (cluster, topic, consuming group), like
    Apache's ``topicList -c``, without retry and dead-letter topics; `with_attributes` adds
    each topic's messageType and attributes (`attribute_index`)."""
    rows = await _topic_rows(admin, with_cluster, on_progress)
    if with_attributes:
        index = await attribute_index(admin)
        blank = dict.fromkeys(ATTRIBUTE_COLUMNS)
        rows = [row | index.get(row["topic"], blank) for row in rows]
    return rows


async def _topic_rows(admin: MQAdmin, with_cluster: bool, on_progress: Progress | None
                      ) -> list[Row]:
    topics = sorted((await admin.namesrv.all_topics()).topic_list)
    if not with_cluster:
        return [{"topic": topic} for topic in topics]
    info = await admin.namesrv.cluster_info()
    clusters = sorted(info.cluster_addr_table)
    lists = await asyncio.gather(*(admin.namesrv.topics_by_cluster(c) for c in clusters))
    clusters_of: dict[str, list[str]] = defaultdict(list)
    for cluster, listed in zip(clusters, lists, strict=True):
        for topic in listed.topic_list:
            clusters_of[topic].append(cluster)
    shown = [t for t in topics if not t.startswith((RETRY_PREFIX, DLQ_PREFIX))]
    gate = asyncio.Semaphore(CONCURRENCY)
    finished = 0

    async def groups_of(topic: str) -> list[str]:
        nonlocal finished
        async with gate:
            try:
                _, brokers = await route_brokers(admin, topic)
                found: list[str] = []
                for addr in brokers.values():
                    found = sorted((await admin.broker.topic_consumed_by(addr, topic)).group_list)
                    break
            except ClientError:
                found = []
        finished += 1
        if on_progress is not None:
            on_progress(finished, len(shown))
        return found

    groups = await asyncio.gather(*(groups_of(t) for t in shown))
    return [{"cluster": cluster, "topic": topic, "group": group}
            for topic, topic_groups in zip(shown, groups, strict=True)
            for cluster in clusters_of.get(topic) or [""]
            for group in (list[str | None](topic_groups) or [None])]


@dataclass(frozen=True, slots=True)
class TopicStatus:
    """A topic as read once: its route, and the min/max offset and last store time of each
    queue on the brokers asked (all of the route's, or one cluster's), with those that did
    not answer."""

    topic: str
    route: TopicRouteData
    offsets: tuple[tuple[MessageQueue, TopicOffset], ...]
    failures: list[tuple[str, ClientError]] = field(default_factory=list)
    asked: int = 0


async def read_status(admin: MQAdmin, topic: str, cluster: str | None = None) -> TopicStatus:
    """The topic's route and each queue's offsets (on the brokers of `cluster` only, when
    given), sorted by queue.

    Raises:
        TopicNotExistError: no route.
    """
    route, brokers = await route_brokers(admin, topic)
    if cluster:
        names = {d.broker_name for d in route.broker_datas if d.cluster == cluster}
        brokers = {n: a for n, a in brokers.items() if n in names}
    outcomes = await admin.on_brokers(list(brokers.values()),
                                      lambda addr: admin.broker.topic_stats(addr, topic))
    offsets = tuple(item for o in outcomes if o.value is not None
                    for item in sorted(o.value.offset_table.items()))
    return TopicStatus(topic, route, offsets, failures_of(outcomes), len(outcomes))


def route_rows(topic: str, route: TopicRouteData,
               message_types: Mapping[str, str | None] | None = None) -> list[Row]:
    """topicRoute's rows: one per broker address serving `topic`, with that broker's queue
    data and (`message_types`, by broker name) the topic's RocketMQ 5 message type there."""
    types = message_types or {}
    queues = {q.broker_name: q for q in route.queue_datas}
    brokers = {b.broker_name: b for b in route.broker_datas}
    rows: list[Row] = []
    for name in sorted(queues.keys() | brokers.keys()):
        queue, broker = queues.get(name), brokers.get(name)
        addrs: list[tuple[int | None, str | None]] = (
            sorted(broker.broker_addrs.items()) if broker and broker.broker_addrs
            else [(None, None)])
        for broker_id, addr in addrs:
            rows.append({
                "topic": topic, "cluster": broker.cluster if broker else None,
                "brokerName": name, "brokerId": broker_id, "addr": addr,
                "readQueueNums": queue.read_queue_nums if queue else None,
                "writeQueueNums": queue.write_queue_nums if queue else None,
                "perm": queue.perm if queue else None,
                "topicSysFlag": queue.topic_sys_flag if queue else None,
                "messageType": types.get(name),
            })
    return rows


def status_rows(status: TopicStatus) -> Gathered:
    """topicStatus's rows: each queue's min and max offset and last store time."""
    rows = [{"topic": status.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
             "minOffset": off.min_offset, "maxOffset": off.max_offset,
             "lastUpdated": format_time(off.last_update_timestamp)}
            for mq, off in status.offsets]
    return Gathered(rows, status.failures, status.asked, noun="brokers")


async def topic_route(admin: MQAdmin, topic: str) -> list[Row]:
    """topicRoute: the route as `route_rows`.

    Raises:
        TopicNotExistError: no broker serves the topic.
    """
    route = await admin.namesrv.topic_route(topic)
    return route_rows(topic, route, await _message_types(admin, route, topic))


async def _message_types(admin: MQAdmin, route: TopicRouteData,
                         topic: str) -> dict[str, str | None]:
    """The topic's `message.type` on each broker's master (GET_TOPIC_CONFIG; the route
    carries no attributes): None where it has none, or the broker is 4.x or away."""
    masters = {b.broker_name: a for b in route.broker_datas if (a := b.master_addr())}

    async def read(addr: str) -> str | None:
        try:
            return message_type_cell(await admin.broker.topic_config(addr, topic))
        except ClientError:
            return None

    found = await asyncio.gather(*(read(a) for a in masters.values()))
    return dict(zip(masters, found, strict=True))


async def topic_status(admin: MQAdmin, topic: str, cluster: str | None = None) -> Gathered:
    """topicStatus: `read_status` as `status_rows`.

    Raises:
        TopicNotExistError: no route.
    """
    return status_rows(await read_status(admin, topic, cluster))


async def topic_cluster_list(admin: MQAdmin, topic: str) -> list[Row]:
    """The clusters whose brokers serve the topic.

    Raises:
        TopicNotExistError: no route.
    """
    route = await admin.namesrv.topic_route(topic)
    return [{"topic": topic, "cluster": c} for c in sorted({d.cluster for d in route.broker_datas})]


async def order_conf(admin: MQAdmin, topic: str) -> Gathered:
    """The order conf of `topic` on every name server (empty when absent)."""
    async def get(addr: str) -> str | None:
        try:
            return await admin.namesrv.get_kv_config(ORDER_NAMESPACE, topic, addr=addr)
        except NotFoundError:
            return None

    outcomes = await admin.namesrv.on_each(get)
    rows = [{"nameServer": o.addr, "topic": topic, "orderConf": o.value}
            for o in outcomes if o.error is None]
    return Gathered(rows, failures_of(outcomes), len(outcomes))


# ---------------------------------------------------------------------------- broker side


@dataclass(frozen=True, slots=True)
class TopicState:
    """A topic on one server: the broker's config, or a name server's view."""

    on_namesrv: bool
    config: TopicConfig | None = None  # broker: None when absent
    route_brokers: tuple[str, ...] = ()  # name server: the cluster's brokers in the route
    order_conf: str | None = None  # name server: the order conf KV item
    pending_sync: bool = False  # a slave that drops it at its next metadata sync

    def show(self) -> str:
        if self.pending_sync and self.config is not None:
            return f"{show_config(self.config)} (until its next metadata sync)"
        if self.on_namesrv:
            route = ",".join(self.route_brokers) or "(no route)"
            return route if self.order_conf is None else f"{route} order={self.order_conf}"
        return show_config(self.config)


def show_config(config: TopicConfig | None) -> str:
    if config is None:
        return "(absent)"
    shown = (f"r={config.read_queue_nums} w={config.write_queue_nums} "
             f"perm={perm_to_string(config.perm)} sysFlag={config.topic_sys_flag}")
    return f"{shown} attrs={show_attributes(config.attributes)}" if config.attributes else shown


async def broker_topic(admin: MQAdmin, addr: str, topic: str) -> TopicConfig | None:
    """The broker's config of `topic` (None when it has none)."""
    return (await admin.broker.all_topic_config(addr)).topic_config_table.get(topic)


async def namesrv_topic(admin: MQAdmin, addr: str, topic: str, cluster: str | None
                        ) -> TopicState:
    try:
        route = await admin.namesrv.topic_route(topic, addr=addr)
    except TopicNotExistError:
        return TopicState(True)
    names = {d.broker_name for d in route.broker_datas if not cluster or d.cluster == cluster}
    queued = tuple(sorted(q.broker_name for q in route.queue_datas if q.broker_name in names))
    try:
        conf: str | None = await admin.namesrv.get_kv_config(ORDER_NAMESPACE, topic, addr=addr)
    except NotFoundError:
        conf = None
    return TopicState(True, route_brokers=queued, order_conf=conf)


def _same(a: TopicConfig | None, b: TopicConfig) -> bool:
    return a is not None and (a.read_queue_nums, a.write_queue_nums, a.perm,
                              a.topic_sys_flag) == (b.read_queue_nums, b.write_queue_nums,
                                                    b.perm, b.topic_sys_flag)


def _merge_order_conf(current: str | None, entries: dict[str, int]) -> str:
    """Apache's ``createOrUpdateOrderConf`` for one broker: replace its entry, keep others."""
    merged: dict[str, str] = {}
    for part in (current or "").split(";"):
        if ":" in part:
            name, num = part.split(":", 1)
            merged[name.strip()] = num.strip()
    merged.update({name: str(num) for name, num in entries.items()})
    return ";".join(f"{name}:{num}" for name, num in merged.items())


def update_topic(admin: MQAdmin, config: TopicConfig, *, broker_addr: str | None,
                 cluster: str | None, attributes: Mapping[str, str] | None = None
                 ) -> Mutation[TopicState]:
    """Create or update `config` on one broker or every master of a cluster; for an ordered
    topic also write its order conf (broker:writeQueueNums;...) to every name server.

    `attributes` are changes in Apache's signed form (`parse_attributes`); without them a
    broker keeps the topic's attributes.  A 4.x broker keeps none: it is refused before
    anything is changed on it.
    """
    topic = config.topic_name
    changes = dict(attributes or {})
    brokers: dict[str, str] = {}  # addr -> broker name, filled when the servers are listed

    async def servers() -> list[str]:
        if broker_addr:
            await refuse_slave(admin, broker_addr, "topics")
            names = {a: d.broker_name for d in
                     (await admin.namesrv.cluster_info()).broker_addr_table.values()
                     for a in d.broker_addrs.values()}
            brokers[broker_addr] = names.get(broker_addr, broker_addr)
        else:
            assert cluster is not None
            brokers.update({a: n for n, a in (await masters(admin, cluster)).items()})
        return list(brokers) + (list(admin.namesrv.addrs) if config.order else [])

    def wanted_conf(current: str | None) -> str:
        entries = {name: config.write_queue_nums for name in brokers.values()}
        return _merge_order_conf(None if cluster else current, entries)

    async def read(addr: str) -> TopicState:
        if addr in brokers:
            return TopicState(False, await broker_topic(admin, addr, topic))
        return await namesrv_topic(admin, addr, topic, cluster)

    async def change(addr: str) -> str:
        if addr in brokers:
            if changes:
                await refuse_without_attributes(
                    addr, admin.broker.topic_config(addr, topic), "topic attributes (-a)")
            await admin.broker.create_topic(addr, config, attributes=changes)
            return "OK"
        current = await namesrv_topic(admin, addr, topic, cluster)
        await admin.namesrv.put_kv_config(ORDER_NAMESPACE, topic,
                                          wanted_conf(current.order_conf), addr=addr)
        return "order conf written"

    def wanted(before: TopicState) -> TopicConfig:
        kept = before.config.attributes if before.config else None
        if changes:
            kept = expected_attributes(before.config, changes)
        return replace(config, attributes=kept)

    def after(state: TopicState) -> str:
        if state.on_namesrv:
            return f"order={wanted_conf(state.order_conf)}"
        if changes and expected_attributes(state.config, changes) is None:
            return f"{show_config(replace(config, attributes=None))} (attributes refused)"
        return show_config(wanted(state))

    def done(before: TopicState, state: TopicState) -> bool:
        if state.on_namesrv:
            return state.order_conf == wanted_conf(before.order_conf)
        if not _same(state.config, config) or state.config is None:
            return False
        return not changes or state.config.attributes == wanted(before).attributes

    return Mutation("updateTopic", topic, servers=servers, read=read, show=TopicState.show,
                    done=done, apply=change, after=after, sequential=True,
                    role="server" if config.order else "broker")


#: What a slave that does not take deletions (Apache 4.9) answers DELETE_TOPIC_IN_BROKER.
SLAVE_REFUSAL = "from slave broker"
#: The most read or write queues updateTopic sets per broker.  Apache's broker enforces no
#: bound of its own on UPDATE_AND_CREATE_TOPIC (4.9.7 and 5.3 alike), so this is mqadmin's:
#: beyond it every listing, route and rebalance of the topic gets slow.
QUEUE_NUMS_MAX = 1024


def delete_topic(admin: MQAdmin, topic: str, cluster: str) -> Mutation[TopicState]:
    """Delete the topic on every master of `cluster`, then on their slaves (so a slave
    promoted before its next metadata sync cannot bring it back), then its route on every
    name server.  A slave that refuses (Apache 4.9) drops it at its next metadata sync."""
    brokers: set[str] = set()
    waiting: set[str] = set()  # slaves that leave it to their metadata sync

    async def servers() -> list[str]:
        leaders = set((await masters(admin, cluster)).values())
        followers = [a for a in await cluster_brokers(admin, cluster) if a not in leaders]
        brokers.update(leaders, followers)
        return sorted(leaders) + followers + list(admin.namesrv.addrs)

    async def read(addr: str) -> TopicState:
        if addr in brokers:
            return TopicState(False, await broker_topic(admin, addr, topic),
                              pending_sync=addr in waiting)
        return await namesrv_topic(admin, addr, topic, cluster)

    async def change(addr: str) -> str:
        if addr in brokers:
            try:
                await admin.broker.delete_topic(addr, topic)
            except ServerError as exc:
                if SLAVE_REFUSAL not in str(exc):
                    raise
                waiting.add(addr)
                return "refused by the slave: removed at its next metadata sync"
        else:
            await admin.namesrv.delete_topic(topic, cluster=cluster, addr=addr)
        return "deleted"

    def gone(_: TopicState, state: TopicState) -> bool:
        if state.on_namesrv:
            return not state.route_brokers
        return state.config is None or state.pending_sync

    def validate(states: list[TopicState]) -> None:
        if all(gone(s, s) for s in states):
            raise TargetNotFound(f"topic '{topic}' is not on cluster '{cluster}'. List the "
                                 "topics with `mqadmin topicList -c`.")

    return Mutation("deleteTopic", topic, servers=servers, read=read, show=TopicState.show,
                    done=gone, apply=change, after="(absent)", validate=validate,
                    sequential=True)


def update_topic_perm(admin: MQAdmin, topic: str, perm: int, *, broker_addr: str | None,
                      cluster: str | None) -> Mutation[TopicState]:
    """Set the permission of the topic on one broker or on the cluster's brokers of its
    route, keeping its queue numbers, as Apache's updateTopicPerm does.

    Raises:
        UsageProblem: `perm` is not 2, 4 or 6.
    """
    if perm not in VALID_PERMS:
        raise UsageProblem(f"invalid perm {perm}: use 2 (write only), 4 (read only) or 6 "
                           "(read and write).")

    async def servers() -> list[str]:
        route = await admin.namesrv.topic_route(topic)
        if broker_addr:
            return [broker_addr]
        found = sorted(a for d in route.broker_datas if d.cluster == cluster
                       and (a := d.master_addr()) is not None)
        if not found:
            raise TargetNotFound(f"topic '{topic}' has no master broker on cluster "
                                 f"'{cluster}' (see `mqadmin topicRoute -t {topic}`).")
        return found

    async def read(addr: str) -> TopicState:
        return TopicState(False, await broker_topic(admin, addr, topic))

    async def change(addr: str) -> str:
        current = await broker_topic(admin, addr, topic)
        if current is None:
            raise TopicNotExistError(17, f"topic {topic} is not on this broker", addr)
        await admin.broker.create_topic(addr, replace(current, perm=perm))
        return "OK"

    def validate(states: list[TopicState]) -> None:
        if all(s.config is None for s in states):
            raise TargetNotFound(f"topic '{topic}' is not on the broker(s) named. List its "
                                 f"brokers with `mqadmin topicRoute -t {topic}`.")

    return Mutation("updateTopicPerm", topic, servers=servers, read=read, show=TopicState.show,
                    done=lambda _, s: s.config is not None and s.config.perm == perm,
                    apply=change, after=f"perm={perm_to_string(perm)}", validate=validate,
                    role="broker")


def new_topic_config(topic: str, *, read: int, write: int, perm: int, order: bool,
                     unit: bool, has_unit_sub: bool) -> TopicConfig:
    """The config updateTopic sends (`TopicSysFlag.buildSysFlag` for the unit flags).

    Raises:
        UsageProblem: a bad name, queue number or permission.
    """
    name = check_topic_name(topic)
    if read < 1 or write < 1:
        raise UsageProblem("queue numbers must be at least 1 (-r, -w).")
    if max(read, write) > QUEUE_NUMS_MAX:
        raise UsageProblem(f"at most {QUEUE_NUMS_MAX} queues per broker (-r {read}, -w "
                           f"{write}); for more throughput spread the topic over more "
                           "brokers (-c).")
    if perm not in VALID_PERMS:
        raise UsageProblem(f"invalid perm {perm}: use 2 (write only), 4 (read only) or 6 "
                           "(read and write).")
    flag = (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)
    return TopicConfig(name, read, write, perm, topic_sys_flag=flag, order=order)
