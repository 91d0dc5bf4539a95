"""Which brokers a command talks to (by ``-b`` address, ``-c`` cluster, topic route) and which
consumer groups there are."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence

from engine.client.admin.cluster import MQAdmin, select_addr
from engine.protocol.body.route import ClusterInfo, TopicRouteData
from engine.protocol.group_topics import dlq_topic as dlq_topic
from engine.protocol.group_topics import (
    groups_of_topics,
    is_system_group,
    parse_retry_topic,
    pop_retry_topics,
)
from engine.protocol.group_topics import retry_topic as retry_topic
from engine.protocol.message import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from engine.protocol.perm import is_readable, is_writeable, perm_to_string
from mqadmin.exit_codes import CliError, Forbidden, TargetNotFound, Unavailable, UsageProblem

RETRY_PREFIX = RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = DLQ_GROUP_TOPIC_PREFIX


def consumer_groups(topics: Iterable[str], known: Collection[str] = ()) -> list[str]:
    """The groups the retry topics name, sorted; a 5.x group's POP retry topics
    (`%RETRY%<group>_<topic>`, `%RETRY%<group>+<topic>`) name that group, not one of their
    own (`engine.protocol.group_topics`, the `known` groups deciding)."""
    return sorted(groups_of_topics(topics, known))


async def known_groups(admin: MQAdmin) -> list[str]:
    """Every application consumer group the cluster knows, sorted: each broker's
    subscription groups, and the groups the retry topics name (a group deleted from the
    brokers whose retry topic is left); system groups left out.

    Raises:
        ClientError: the name servers did not answer.
    """
    addrs, topics = await asyncio.gather(admin.broker_addrs(), admin.namesrv.all_topics())
    tables = await admin.on_brokers(list(addrs.values()), admin.broker.all_group_config)
    configured = {g for o in tables if o.value is not None
                  for g in o.value.subscription_group_table}
    found = configured | groups_of_topics(topics.topic_list, configured)
    return sorted(g for g in found if not is_system_group(g))


async def retry_targets(admin: MQAdmin, group: str, topics: Sequence[str]) -> dict[str, str]:
    """The topic a copy goes to so that only `group` consumes it again, for each original
    topic: a 5.x POP group's POP retry topic for it when spelt V2 (``%RETRY%<group>+<topic>``,
    the one its consumers read on a broker with enableRetryTopicV2), else ``%RETRY%<group>``.

    Raises:
        UsageProblem: the group is a POP group whose POP retry topics are spelt V1: a copy
            sent to ``%RETRY%<group>_<topic>`` is filed by the broker under a group named
            ``<group>_<topic>`` (5.3 creates that group; ours refuses), and its consumers do
            not read ``%RETRY%<group>``.
    """
    listed = set((await admin.namesrv.all_topics()).topic_list)
    plain = {t for t in listed if not t.startswith("%")}
    own = [p for t in listed if (p := parse_retry_topic(t, {group}, plain)) is not None
           and p.group == group and p.topic is not None]
    pop = retry_topic(group) not in listed and bool(own)
    v2 = any(p.v2 for p in own)
    found: dict[str, str] = {}
    for topic in topics:
        v1_name, v2_name = pop_retry_topics(group, topic)
        if v2_name in listed or (pop and v2):
            found[topic] = v2_name
        elif v1_name in listed or pop:
            raise UsageProblem(
                f"group '{group}' consumes {topic} by POP (5.x) and retries it in {v1_name}: "
                f"a copy sent there would be filed under a group '{group}_{topic}' (the broker "
                f"reads the group from the name), and the group's consumers do not read "
                f"{retry_topic(group)}. Send it to {topic} itself (every group of it gets it: "
                "`dlq resend --to topic`, `queryMsgById -s`), or set enableRetryTopicV2=true "
                f"on the brokers (POP retry topics spelt %RETRY%{group}+{topic}).")
        else:
            found[topic] = retry_topic(group)
    return found


async def origin_topic(admin: MQAdmin, topic: str, retry_of: str | None) -> str:
    """The topic a message stored in `topic` was first sent to: itself, or for a retry
    topic its RETRY_TOPIC property (`retry_of`), else the topic a POP retry topic retries
    (5.3's revive does not set RETRY_TOPIC), decided by the known groups and topics."""
    if not topic.startswith(RETRY_PREFIX):
        return topic
    if retry_of:
        return retry_of
    listed = set((await admin.namesrv.all_topics()).topic_list)
    plain = {t for t in listed if not t.startswith("%")}
    parsed = parse_retry_topic(topic, await known_groups(admin), plain)
    return parsed.topic if parsed is not None and parsed.topic is not None else topic



def _unknown_cluster(cluster: str, info: ClusterInfo) -> TargetNotFound:
    known = ", ".join(sorted(info.cluster_addr_table)) or "none"
    return TargetNotFound(f"cluster '{cluster}' has no broker online (clusters known: "
                          f"{known}). Check the name with `mqadmin clusterList`.")


async def masters(admin: MQAdmin, cluster: str | None = None, *,
                  info: ClusterInfo | None = None, or_slave: bool = False) -> dict[str, str]:
    """The master of each broker of `cluster` (of every cluster when None), by broker name,
    as the name servers list them (`info`, when it was read already).  With `or_slave`, for
    reads: a broker whose master is down is read on its lowest-numbered slave instead.

    Raises:
        TargetNotFound: `cluster` is named and unknown, or has no master (no broker with
            `or_slave`) online.
        UnreachableError: no name server answered.
    """
    if info is None:
        info = await admin.namesrv.cluster_info()
    names: Iterable[str] = (info.broker_addr_table if cluster is None
                            else info.cluster_addr_table.get(cluster, ()))
    found: dict[str, str] = {}
    for name in sorted(names):
        data = info.broker_addr_table.get(name)
        addr = None if data is None else select_addr(data) if or_slave else data.master_addr()
        if addr is not None:
            found[name] = addr
    if cluster is not None and not found:
        raise _unknown_cluster(cluster, info)
    return found


async def clusters(admin: MQAdmin) -> dict[str, list[str]]:
    """Every cluster the name servers know, by name (sorted), with its broker names (sorted).

    Raises:
        UnreachableError: no name server answered.
    """
    info = await admin.namesrv.cluster_info()
    return {c: sorted(names) for c, names in sorted(info.cluster_addr_table.items())}


async def cluster_brokers(admin: MQAdmin, cluster: str) -> list[str]:
    """Every broker address (masters and slaves) of `cluster`, as Apache's
    ``fetchMasterAndSlaveAddrByClusterName``.

    Raises:
        TargetNotFound: the cluster is unknown or has no broker online.
    """
    info = await admin.namesrv.cluster_info()
    addrs = [addr for name in sorted(info.cluster_addr_table.get(cluster, ()))
             if (data := info.broker_addr_table.get(name)) is not None
             for _, addr in sorted(data.broker_addrs.items())]
    if not addrs:
        raise _unknown_cluster(cluster, info)
    return addrs


async def refuse_slave(admin: MQAdmin, addr: str, what: str) -> None:
    """Topics and groups are changed on masters (a slave copies them): ``-b`` naming a slave
    is a usage error naming its master, raised while planning.

    Raises:
        UsageProblem: the name servers list `addr` as a slave.
    """
    info = await admin.namesrv.cluster_info()
    for data in info.broker_addr_table.values():
        for broker_id, addr_ in data.broker_addrs.items():
            if addr_ == addr and broker_id != 0:
                master = data.master_addr()
                use = (f"-b {master} (its master)" if master else "its master once one is "
                       "online (see `mqadmin haStatus`)")
                raise UsageProblem(f"{addr} is a slave of {data.broker_name} (brokerId "
                                   f"{broker_id}); {what} are changed on the master and copied "
                                   f"to slaves: use {use}, or -c {data.cluster}.")


def brokers_of(admin: MQAdmin, broker_addr: str | None, cluster: str | None, *,
               slaves: bool = False, masters_only: str | None = None
               ) -> Callable[[], Awaitable[list[str]]]:
    """`Mutation.servers` for ``-b addr`` or ``-c cluster`` (its masters, or every broker
    with `slaves`); with `masters_only` (what changes, e.g. "groups") ``-b`` must name a
    master (`refuse_slave`)."""
    async def servers() -> list[str]:
        if broker_addr:
            if masters_only:
                await refuse_slave(admin, broker_addr, masters_only)
            return [broker_addr]
        assert cluster is not None
        if slaves:
            return await cluster_brokers(admin, cluster)
        return list((await masters(admin, cluster)).values())
    return servers


async def route_brokers(admin: MQAdmin, topic: str) -> tuple[TopicRouteData, dict[str, str]]:
    """The topic's route and one address per broker name of it (the master, else a slave).

    Raises:
        TopicNotExistError: no route.
    """
    route = await admin.namesrv.topic_route(topic)
    found: dict[str, str] = {}
    for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
        addr = select_addr(data)
        if addr is not None:
            found[data.broker_name] = addr
    return route, found


async def broker_names(admin: MQAdmin) -> dict[str, str]:
    """Broker name by address, for every registered broker."""
    info = await admin.namesrv.cluster_info()
    return {addr: data.broker_name for data in info.broker_addr_table.values()
            for addr in data.broker_addrs.values()}


def unwritable(topic: str, route: TopicRouteData) -> CliError:
    """Why no producer can write to `topic` although it has a route, as the error to raise:
    a broker name whose queues are writable has no master online (an outage:
    `Unavailable`), or every broker with a master forbids writing (`Forbidden`)."""
    masters = {d.broker_name for d in route.broker_datas if d.master_addr() is not None}
    down = sorted({q.broker_name for q in route.queue_datas
                   if is_writeable(q.perm) and q.broker_name not in masters})
    if down:
        names = ", ".join(down)
        return Unavailable(
            f"topic '{topic}' cannot be written now: {names} has no master online. Check the "
            f"master's process and log (`mqadmin clusterList`, `mqadmin haStatus -b "
            f"{down[0]}`); if it does not come back, promote its slave with `mqadmin "
            f"failover -b {down[0]}`.")
    refusing = sorted((q.broker_name, q.perm) for q in route.queue_datas
                      if q.broker_name in masters)
    if refusing:
        perms = ", ".join(f"{n} perm={perm_to_string(p)}" for n, p in refusing)
        return Forbidden(f"topic '{topic}' does not allow writing ({perms}). Allow it with "
                         f"`mqadmin updateTopicPerm -t {topic} -c CLUSTER -p 6`.")
    return TargetNotFound(f"topic '{topic}' has no queues (see `mqadmin topicRoute -t "
                          f"{topic}`).")


async def check_queue_id(admin: MQAdmin, topic: str, broker_name: str | None,
                         queue_id: int) -> None:
    """Refuse a queue id the topic's route does not give the broker (any broker of the
    route when None) before asking a broker: its readable queues (all queues of a
    write-only topic, such as a dead-letter queue).

    Raises:
        TopicNotExistError: no route.
        TargetNotFound: the broker has no queue of the topic.
        UsageProblem: the queue id is outside the broker's queues; names the valid range.
    """
    route = await admin.namesrv.topic_route(topic)
    counts = {q.broker_name: max(q.read_queue_nums,
                                 q.write_queue_nums if not is_readable(q.perm) else 0)
              for q in route.queue_datas}
    where = f"`mqadmin topicRoute -t {topic}`"
    if broker_name is not None and broker_name not in counts:
        known = ", ".join(sorted(counts)) or "none"
        raise TargetNotFound(f"topic '{topic}' has no queues on broker '{broker_name}' "
                             f"(brokers of its route: {known}); see {where}.")
    names = [broker_name] if broker_name is not None else sorted(counts)
    if any(0 <= queue_id < counts[n] for n in names):
        return
    ranges = "; ".join(f"0..{counts[n] - 1} on {n}" if counts[n] else f"none on {n}"
                       for n in names)
    raise UsageProblem(f"queue {queue_id} is not a queue of topic '{topic}': its queues are "
                       f"{ranges} (see {where}).")


async def broker_addr_by_name(admin: MQAdmin, broker_name: str) -> str:
    """The address of a broker by name (master, else lowest slave).

    Raises:
        TargetNotFound: no broker of that name is registered.
    """
    info = await admin.namesrv.cluster_info()
    data = info.broker_addr_table.get(broker_name)
    addr = select_addr(data) if data is not None else None
    if addr is None:
        known = ", ".join(sorted(info.broker_addr_table)) or "none"
        raise TargetNotFound(f"no broker named '{broker_name}' is registered (known: {known})."
                             " List them with `mqadmin clusterList`.")
    return addr
