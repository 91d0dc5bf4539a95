"""Which brokers a command talks to: by ``-b`` address, by ``-c`` cluster, by topic route."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.client.admin import MQAdmin, select_addr
from engine.protocol.body.route import ClusterInfo, TopicRouteData
from mqadmin.exit_codes import TargetNotFound

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def _unknown_cluster(cluster: str, info: ClusterInfo) -> TargetNotFound:
    known = ", ".join(sorted(info.cluster_addr_table)) or "none"
    return TargetNotFound(f"cluster '{cluster}' has no broker online (clusters known: "
                          f"{known}). Check the name with `mqadmin clusterList`.")


async def masters(admin: MQAdmin, cluster: str) -> dict[str, str]:
    """The master of each broker of `cluster`, by broker name.

    Raises:
        TargetNotFound: the cluster is unknown or has no master online.
    """
    found = await admin.master_addrs(cluster)
    if not found:
        raise _unknown_cluster(cluster, await admin.namesrv.cluster_info())
    return found


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


def brokers_of(admin: MQAdmin, broker_addr: str | None, cluster: str | None, *,
               slaves: bool = False) -> Callable[[], Awaitable[list[str]]]:
    """`Mutation.servers` for ``-b addr`` or ``-c cluster`` (its masters, or every broker
    with `slaves`)."""
    async def servers() -> list[str]:
        if broker_addr:
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
