"""Cluster and broker operations: clusterList, brokerStatus, get/updateBrokerConfig,
brokerConsumeStats, statsAll, clusterRT.

How this works: the name servers say which brokers there are; each broker is then asked at
once (runtime info, settings, statistics), and a broker that does not answer leaves its
row with empty figures and a failure in the `Gathered` result, so the command can show
what it has and exit with PARTIAL.  Figures are parsed from the runtime-info strings Apache
brokers return (``putTps`` is "1.0 0.5 0.2", the first number is the last 10 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.client.admin import MQAdmin
from engine.client.broker_admin import BrokerAdmin
from engine.client.broker_call import RELAYED_TIMEOUT_FACTOR
from engine.client.errors import ClientError
from engine.client.message import Message
from engine.client.namesrv import ServerOutcome
from engine.protocol.body.admin import BrokerStatsData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import ClusterInfo
from mqadmin.operations.consume_stats import queue_lags
from mqadmin.operations.mutation import (
    Gathered,
    Mutation,
    Progress,
    failures_of,
)
from mqadmin.operations.targets import DLQ_PREFIX, RETRY_PREFIX, brokers_of, cluster_brokers
from mqadmin.operations.times import format_time

Row = dict[str, Any]
T = TypeVar("T")

CLUSTER_COLUMNS = ("cluster", "brokerName", "brokerId", "addr", "version", "inTPS", "outTPS",
                   "pcWaitMs", "hour", "space")
CLUSTER_MORE_COLUMNS = ("cluster", "brokerName", "brokerId", "addr", "inTotalYest",
                        "outTotalYest", "inTotalToday", "outTotalToday")
STATUS_COLUMNS = ("brokerName", "addr", "key", "value")
CONFIG_COLUMNS = ("addr", "key", "value")
CONSUME_STATS_COLUMNS = ("topic", "group", "brokerName", "queueId", "brokerOffset",
                         "consumerOffset", "diff", "lastTime")
STATS_ALL_COLUMNS = ("topic", "group", "accumulation", "inTPS", "outTPS", "inMsg24Hour",
                     "outMsg24Hour")
RT_COLUMNS = ("cluster", "brokerName", "rtMs", "successCount", "failCount")
RT_LOG_COLUMNS = ("time", "machineRoom", "cluster", "brokerName", "rtMs", "successCount",
                  "failCount")
#: Broker calls at once while gathering per-topic statistics.
CONCURRENCY = 16


def _first_number(text: str | None) -> float | None:
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _diff(a: str | None, b: str | None) -> int | None:
    x, y = _int(a), _int(b)
    return x - y if x is not None and y is not None else None


@dataclass(frozen=True, slots=True)
class BrokerRuntime:
    """One broker address as the name servers list it, and its runtime figures as read at
    `read_at` (ms); `table` is empty when it did not answer."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    table: Mapping[str, str]
    read_at: float

    @property
    def version(self) -> str | None:
        return self.table.get("brokerVersionDesc")

    @property
    def in_tps(self) -> float | None:
        """Messages stored per second over the last 10 s."""
        tps = _first_number(self.table.get("putTps"))
        return round(tps, 2) if tps is not None else None

    @property
    def out_tps(self) -> float | None:
        """Messages sent to consumers per second over the last 10 s."""
        tps = _first_number(self.table.get("getTransferedTps"))
        return round(tps, 2) if tps is not None else None

    @property
    def page_cache_wait_ms(self) -> int | None:
        return _int(self.table.get("pageCacheLockTimeMills"))

    @property
    def hours_kept(self) -> float | None:
        """Hours since the oldest message kept was stored."""
        earliest = _int(self.table.get("earliestMessageTimeStamp"))
        return (round((self.read_at - earliest) / 3_600_000, 2) if earliest and earliest > 0
                else None)

    @property
    def disk_ratio(self) -> float | None:
        """The commit log's disk, used over total."""
        space = _first_number(self.table.get("commitLogDiskRatio"))
        return round(space, 4) if space is not None else None

    @property
    def timers_waiting(self) -> int | None:
        """Timer messages (5.x) waiting in the broker's wheel (timerCongestNum)."""
        return _int(self.table.get("timerCongestNum"))

    @property
    def timer_behind_s(self) -> int | None:
        """Seconds the timer wheel's read time is behind now (timerReadBehind)."""
        return _int(self.table.get("timerReadBehind"))

    def totals(self) -> Row:
        """Messages in and out yesterday and today (clusterList -m)."""
        kv = self.table
        return {
            "inTotalYest": _diff(kv.get("msgPutTotalTodayMorning"),
                                 kv.get("msgPutTotalYesterdayMorning")),
            "outTotalYest": _diff(kv.get("msgGetTotalTodayMorning"),
                                  kv.get("msgGetTotalYesterdayMorning")),
            "inTotalToday": _diff(kv.get("msgPutTotalTodayNow"),
                                  kv.get("msgPutTotalTodayMorning")),
            "outTotalToday": _diff(kv.get("msgGetTotalTodayNow"),
                                   kv.get("msgGetTotalTodayMorning")),
        }


@dataclass(frozen=True, slots=True)
class ClusterBrokers:
    """Every broker address of the clusters (by cluster, name and id) with its runtime, and
    the brokers that did not answer."""

    brokers: tuple[BrokerRuntime, ...]
    failures: list[tuple[str, ClientError]] = field(default_factory=list)


async def read_brokers(admin: MQAdmin, *, cluster: str | None = None,
                       info: ClusterInfo | None = None) -> ClusterBrokers:
    """The brokers `info` (else the name servers, asked now) lists, of one cluster or of all,
    each asked its runtime info at once."""
    if info is None:
        info = await admin.namesrv.cluster_info()
    where: list[tuple[str, str, int, str]] = []
    for name_of_cluster in sorted(info.cluster_addr_table):
        if cluster and name_of_cluster != cluster:
            continue
        for name in sorted(info.cluster_addr_table[name_of_cluster]):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id in sorted(data.broker_addrs):
                where.append((name_of_cluster, name, broker_id, data.broker_addrs[broker_id]))
    outcomes = await admin.on_brokers([w[3] for w in where],
                                      lambda addr: admin.broker.runtime_info(addr))
    now = time.time() * 1000
    return ClusterBrokers(
        tuple(BrokerRuntime(c, name, broker_id, addr,
                            o.value.table if o.value is not None else {}, now)
              for (c, name, broker_id, addr), o in zip(where, outcomes, strict=True)),
        failures_of(outcomes))


def cluster_rows(found: ClusterBrokers, *, more: bool = False) -> Gathered:
    """clusterList's rows: one per broker address with Apache's columns (version, in/out
    TPS, page-cache lock wait, hours of messages kept, commit-log disk ratio; with `more`,
    messages in and out yesterday and today)."""
    rows: list[Row] = []
    for b in found.brokers:
        row: Row = {"cluster": b.cluster, "brokerName": b.broker_name,
                    "brokerId": b.broker_id, "addr": b.addr}
        if more:
            row |= b.totals()
        else:
            row |= {"version": b.version, "inTPS": b.in_tps, "outTPS": b.out_tps,
                    "pcWaitMs": b.page_cache_wait_ms, "hour": b.hours_kept,
                    "space": b.disk_ratio}
        rows.append(row)
    return Gathered(rows, found.failures, len(found.brokers), noun="brokers")


async def cluster_list(admin: MQAdmin, *, more: bool = False,
                       cluster: str | None = None) -> Gathered:
    """clusterList: `read_brokers` as `cluster_rows`."""
    return cluster_rows(await read_brokers(admin, cluster=cluster), more=more)


async def _broker_tables(admin: MQAdmin, broker_addr: str | None, cluster: str | None,
                         read: Callable[[str], Awaitable[T]]) -> list[ServerOutcome[T]]:
    addrs = [broker_addr] if broker_addr else await cluster_brokers(admin, cluster or "")
    return await admin.on_brokers(addrs, read)


async def broker_status(admin: MQAdmin, broker_addr: str | None,
                        cluster: str | None) -> Gathered:
    """Every runtime figure of one broker, or of every broker of a cluster, sorted by key."""
    names = {addr: data.broker_name
             for data in (await admin.namesrv.cluster_info()).broker_addr_table.values()
             for addr in data.broker_addrs.values()}
    outcomes = await _broker_tables(admin, broker_addr, cluster, admin.broker.runtime_info)
    rows = [{"brokerName": names.get(o.addr), "addr": o.addr, "key": key,
             "value": o.value.table[key]}
            for o in outcomes if o.value is not None for key in sorted(o.value.table)]
    return Gathered(rows, failures_of(outcomes), len(outcomes), noun="brokers")


async def broker_config(admin: MQAdmin, broker_addr: str | None,
                        cluster: str | None) -> Gathered:
    """Every setting of one broker, or of every broker of a cluster, in the broker's order."""
    outcomes = await _broker_tables(admin, broker_addr, cluster,
                                       admin.broker.broker_config)
    rows = [{"addr": o.addr, "key": key, "value": value}
            for o in outcomes if o.value is not None for key, value in o.value.items()]
    return Gathered(rows, failures_of(outcomes), len(outcomes), noun="brokers")


ABSENT = "(absent)"


def update_broker_config(admin: MQAdmin, broker_addr: str | None, cluster: str | None,
                         key: str, value: str) -> Mutation[str | None]:
    """Set one setting on a broker, or on every broker (masters and slaves) of a cluster."""
    async def current(addr: str) -> str | None:
        return (await admin.broker.broker_config(addr)).get(key)

    async def update(addr: str) -> str:
        await admin.broker.update_broker_config(addr, {key: value})
        return "OK"

    def took_effect(_: str | None, state: str | None) -> bool:
        return state is not None and state.strip().lower() == value.strip().lower()

    return Mutation("updateBrokerConfig", key,
                    servers=brokers_of(admin, broker_addr, cluster, slaves=True),
                    read=current, show=lambda s: ABSENT if s is None else s, done=took_effect,
                    apply=update, after=value, role="broker")


async def broker_consume_stats(admin: MQAdmin, broker_addr: str, *, order: bool = False,
                               level: int = 0, timeout_ms: int = 50_000) -> tuple[list[Row],
                                                                                   int]:
    """Each queue of each group the broker serves, with its lag (Apache prints only queues
    that have received a message, and with `level` only diffs of at least `level`); the
    broker's total diff."""
    broker = BrokerAdmin(admin.client, timeout_ms / 1000 / RELAYED_TIMEOUT_FACTOR)
    stats = await broker.broker_consume_stats(broker_addr, order_only=order)
    rows = [{"topic": q.topic, "group": q.group, "brokerName": q.broker_name,
             "queueId": q.queue_id, "brokerOffset": q.broker_offset,
             "consumerOffset": q.consumer_offset,
             "diff": q.broker_offset - q.consumer_offset,
             "lastTime": format_time(q.last_timestamp)}
            for q in queue_lags(stats)
            if q.broker_offset - q.consumer_offset >= level and q.last_timestamp > 0]
    return rows, stats.total_diff


def _day_sum(data: BrokerStatsData) -> int:
    """Apache's `compute24HourSum`: the day's sum, else the hour's, else the minute's."""
    for item in (data.stats_day, data.stats_hour, data.stats_minute):
        if item.sum:
            return item.sum
    return 0


async def stats_all(admin: MQAdmin, *, active_only: bool = False, topic: str | None = None,
                    on_progress: Progress | None = None) -> list[Row]:
    """Per topic and consuming group: backlog, in/out TPS and messages in the last 24 hours
    (retry and dead-letter topics left out), from the masters of each topic's route."""
    topics = sorted(t for t in (await admin.namesrv.all_topics()).topic_list
                    if not t.startswith((RETRY_PREFIX, DLQ_PREFIX)) and (not topic or t == topic))
    gate = asyncio.Semaphore(CONCURRENCY)
    finished = 0

    async def stat(addr: str, name: str, key: str) -> BrokerStatsData | None:
        try:
            return await admin.broker.broker_stats(addr, name, key)
        except ClientError:
            return None

    async def one(name: str) -> list[Row]:
        nonlocal finished
        async with gate:
            try:
                rows = await _topic_stats(admin, name, active_only, stat)
            except ClientError:
                rows = []
        finished += 1
        if on_progress is not None:
            on_progress(finished, len(topics))
        return rows

    return [row for rows in await asyncio.gather(*(one(t) for t in topics)) for row in rows]


async def _topic_stats(admin: MQAdmin, topic: str, active_only: bool,
                       stat: Callable[[str, str, str], Any]) -> list[Row]:
    route = await admin.namesrv.topic_route(topic)
    masters = [a for d in route.broker_datas if (a := d.master_addr()) is not None]
    ins = [s for s in await asyncio.gather(*(stat(a, "TOPIC_PUT_NUMS", topic) for a in masters))
           if s is not None]
    in_tps = sum(s.stats_minute.tps for s in ins)
    in_today = sum(_day_sum(s) for s in ins)
    groups: frozenset[str] = frozenset()
    for addr in masters:
        try:
            groups = (await admin.broker.topic_consumed_by(addr, topic)).group_list
            break
        except ClientError:
            continue
    if not groups:
        if active_only and in_today <= 0:
            return []
        return [{"topic": topic, "group": None, "accumulation": 0, "inTPS": round(in_tps, 2),
                 "outTPS": None, "inMsg24Hour": in_today, "outMsg24Hour": None}]
    rows: list[Row] = []
    for group in sorted(groups):
        outs = [s for s in await asyncio.gather(
            *(stat(a, "GROUP_GET_NUMS", f"{topic}@{group}") for a in masters)) if s is not None]
        out_today = sum(_day_sum(s) for s in outs)
        accumulation = 0
        try:
            merged = await admin.consume_stats(group, topic)
            accumulation = max(sum(o.value.compute_total_diff() for o in merged
                                   if o.value is not None), 0)
        except ClientError:
            pass
        if active_only and in_today <= 0 and out_today <= 0:
            continue
        rows.append({"topic": topic, "group": group, "accumulation": accumulation,
                     "inTPS": round(in_tps, 2),
                     "outTPS": round(sum(s.stats_minute.tps for s in outs), 2),
                     "inMsg24Hour": in_today, "outMsg24Hour": out_today})
    return rows


async def cluster_rt(admin: MQAdmin, *, amount: int = 100, size: int = 128,
                     cluster: str | None = None, machine_room: str = "noname",
                     on_progress: Progress | None = None) -> list[Row]:
    """Send `amount` messages of `size` bytes to each broker's own topic (named after the
    broker, as Apache's clusterRT does) and time them; the first send of each broker is left
    out of its average, as Apache does."""
    info = await admin.namesrv.cluster_info()
    clusters = [cluster] if cluster else sorted(info.cluster_addr_table)
    targets = [(c, name) for c in clusters for name in sorted(info.cluster_addr_table.get(c, ()))]
    from mqadmin.operations.sending import producer  # the producer stack: clusterRT only

    body = b"a" * size
    rows: list[Row] = []
    async with producer(admin, retries=0) as p:
        for i, (cluster_name, name) in enumerate(targets):
            data = info.broker_addr_table.get(name)
            addr = data.master_addr() if data is not None else None
            ok = failed = 0
            elapsed = 0.0
            for n in range(amount):
                started = time.perf_counter()
                try:
                    if addr is None:
                        raise ClientError(f"broker {name} has no master online")
                    await p.send_to_queue(Message(name, body), MessageQueue(name, name, 0))
                    ok += 1
                except ClientError:
                    failed += 1
                if n:
                    elapsed += (time.perf_counter() - started) * 1000
            rows.append({"time": time.strftime("%Y-%m-%d %H:%M:%S"),
                         "machineRoom": machine_room, "cluster": cluster_name,
                         "brokerName": name, "rtMs": round(elapsed / max(amount - 1, 1), 2),
                         "successCount": ok, "failCount": failed})
            if on_progress is not None:
                on_progress(i + 1, len(targets))
    return rows
