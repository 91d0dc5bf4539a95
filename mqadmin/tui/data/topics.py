"""The Topics screen's data: every topic with its message type (RocketMQ 5), queues,
permission, brokers, consuming groups and backlog, from one topic-config and one
consume-stats request per master."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin import MQAdmin
from engine.protocol.body.topic import TopicConfig
from engine.protocol.perm import perm_to_string
from mqadmin.operations import topic as topic_ops
from mqadmin.operations.consume_stats import Lags, read_lags
from mqadmin.operations.targets import DLQ_PREFIX, RETRY_PREFIX, clusters, masters
from mqadmin.operations.topic_attributes import message_type_cell, topic_config, topic_tables

Row = dict[str, Any]
SYSTEM_TOPICS = ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_", "BenchmarkTest", "OFFSET_MOVED",
                 "SELF_TEST_TOPIC", "TRANS_", "rmq_sys_")


@dataclass(frozen=True, slots=True)
class TopicsView:
    rows: list[Row]
    clusters: list[str]
    brokers: dict[str, str]  # broker name -> address asked
    failures: list[str] = field(default_factory=list)


def kind_of(topic: str, broker_names: set[str], clusters: set[str]) -> str:
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if (topic.startswith(SYSTEM_TOPICS) or topic.endswith("_REPLY_TOPIC")
            or topic in broker_names or topic in clusters):
        return "system"
    return "normal"


async def read_topics(admin: MQAdmin, *, with_lag: bool = True) -> TopicsView:
    """Every topic; without `with_lag`, without groups and backlog (a quicker first view)."""
    found = await masters(admin, or_slave=True)
    addrs = list(found.values())
    no_lag = Lags([], set(), [])

    async def lags_now() -> Lags:
        return await read_lags(admin, addrs) if with_lag else no_lag

    by_cluster, listed, configs, found_lags = await asyncio.gather(
        clusters(admin), topic_ops.topic_list(admin), topic_tables(admin, addrs), lags_now())
    name_of = {addr: name for name, addr in found.items()}
    per_topic: dict[str, list[tuple[str, TopicConfig]]] = defaultdict(list)
    for outcome in configs:
        if outcome.value is not None:
            for topic, config in outcome.value.items():
                per_topic[topic].append((name_of[outcome.addr], config))
    lags, lag_failures = found_lags.rows, found_lags.failed
    backlog: dict[str, int] = defaultdict(int)
    groups: dict[str, set[str]] = defaultdict(set)
    offsets: dict[tuple[str, str, int], int] = {}
    for lag in lags:
        backlog[lag.topic] += lag.diff
        groups[lag.topic].add(lag.group)
        offsets[(lag.topic, lag.broker_name, lag.queue_id)] = lag.broker_offset
    produced: dict[str, int] = defaultdict(int)
    for (topic, _, _), offset in offsets.items():
        produced[topic] += offset
    cluster_of = {b: c for c, names in by_cluster.items() for b in names}
    rows: list[Row] = []
    for topic in sorted({r["topic"] for r in listed} | set(per_topic)):
        on = sorted(per_topic.get(topic, []), key=lambda p: p[0])
        perms = {c.perm for _, c in on}
        types = {message_type_cell(c) or "" for _, c in on}
        rows.append({
            "topic": topic, "kind": kind_of(topic, set(found), set(by_cluster)),
            "type": "/".join(sorted(t or "(none)" for t in types)) if types - {""} else None,
            "read": sum(c.read_queue_nums for _, c in on) if on else None,
            "write": sum(c.write_queue_nums for _, c in on) if on else None,
            "perm": perm_to_string(perms.pop()) if len(perms) == 1 else
            ("mixed" if perms else None),
            "order": any(c.order for _, c in on),
            "brokers": ",".join(name for name, _ in on) or "(route only)",
            "cluster": ",".join(sorted({cluster_of.get(name, "?") for name, _ in on})),
            "groups": len(groups.get(topic, ())) if with_lag else None,
            "backlog": backlog.get(topic, 0) if topic in groups else None,
            "produced": produced.get(topic),
        })
    failures = [f"{o.addr}: {str(o.error).splitlines()[0]}" for o in configs if o.error]
    return TopicsView(rows, list(by_cluster), found, failures + lag_failures)


@dataclass(frozen=True, slots=True)
class TopicDetail:
    routes: list[Row]
    queues: list[Row]
    groups: list[Row]
    failures: list[str] = field(default_factory=list)
    #: The message type and attributes the brokers keep (topicConfig's rows), one line.
    attributes: str = ""


async def read_topic(admin: MQAdmin, topic: str) -> TopicDetail:
    """A topic's routes and per-queue status (topicRoute's and topicStatus's rows, from one
    read of its route), its groups' lag and its attributes (topicConfig's rows)."""
    read, found, configs = await asyncio.gather(
        topic_ops.read_status(admin, topic),
        read_lags(admin, list((await masters(admin, or_slave=True)).values())),
        topic_config(admin, topic))
    routes, status = topic_ops.route_rows(topic, read.route), topic_ops.status_rows(read)
    lags = [lag for lag in found.rows if lag.topic == topic]
    per_group: dict[str, Row] = {}
    for lag in lags:
        row = per_group.setdefault(lag.group, {"group": lag.group, "lag": 0, "queues": 0,
                                               "tps": lag.group_tps})
        row["lag"] += lag.diff
        row["queues"] += 1
    failures = [f"{addr}: {str(err).splitlines()[0]}" for addr, err in status.failures]
    return TopicDetail(routes, status.rows, sorted(per_group.values(), key=lambda r: r["group"]),
                       failures + found.failed, attributes_line(configs.rows))


def attributes_line(rows: list[Row]) -> str:
    """`message type FIFO (message.type=FIFO)`, per broker when the brokers differ."""
    def one(row: Row) -> str:
        kind = row["messageType"] or "not set (NORMAL to RocketMQ 5 clients)"
        return f"message type {kind}" + (f" ({row['attributes']})" if row["attributes"] else "")

    shown = {one(r) for r in rows if r["readQueueNums"] is not None}
    if len(shown) <= 1:
        return next(iter(shown), "")
    return " · ".join(f"{r['brokerName']}: {one(r)}" for r in rows)
