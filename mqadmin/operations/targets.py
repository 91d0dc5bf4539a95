"""Which brokers a command talks to: by ``-b`` address, by ``-c`` cluster, by topic route."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from engine.client.admin import MQAdmin, select_addr
from engine.protocol.body.route import ClusterInfo, TopicRouteData
from engine.protocol.perm import is_readable, is_writeable, perm_to_string
from mqadmin.exit_codes import CliError, Forbidden, TargetNotFound, Unavailable, UsageProblem

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def consumer_groups(topics: Iterable[str]) -> list[str]:
    """The groups the retry topics name, sorted.  A group's 5.x POP retry topics
    (`%RETRY%<group>_<topic>` beside `%RETRY%<group>`, or `%RETRY%<group>+<topic>`) name that
    group, not one of their own."""
    names = set(topics)
    plain = {t for t in names if not t.startswith("%")}
    groups: set[str] = set()
    for t in names:
        if not t.startswith(RETRY_PREFIX):
            continue
        rest = t[len(RETRY_PREFIX):]
        head, plus, tail = rest.partition("+")
        if plus and tail in plain:
            groups.add(head)
            continue
        if not _pop_retry_of_another(rest, plain, names):
            groups.add(rest)
    return sorted(groups)


def _pop_retry_of_another(rest: str, plain: set[str], names: set[str]) -> bool:
    """Whether `%RETRY%<rest>` is `%RETRY%<group>_<topic>` of a `<group>` with a retry topic
    and a `<topic>` that exists: tried at each "_" of `rest` (not against every topic, which
    made listing groups quadratic in the topics)."""
    at = rest.find("_")
    while at != -1:
        if rest[at + 1:] in plain and retry_topic(rest[:at]) in names:
            return True
        at = rest.find("_", at + 1)
    return False


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
