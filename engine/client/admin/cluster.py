"""`MQAdmin`: the cluster-wide operations operators run, over `NamesrvAdmin` and `BrokerAdmin`.

How this works: the name servers say which brokers are involved (a cluster's masters from
the cluster info, or the brokers of a topic's route), then every broker is called at once
and each one's result or error is kept as a `ServerOutcome`, so a caller can show partial
success instead of stopping at the first failure.  Mutations go to masters only: slaves copy
topics, groups and offsets from their master.  Reads that the route names a broker for use
its master, or its lowest-numbered slave while the master is away (`selectBrokerAddr`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.broker_call import DEFAULT_TIMEOUT
from engine.client.core.errors import ClientError
from engine.client.core.namesrv import NamesrvAdmin, ServerOutcome
from engine.protocol.body.admin import ConsumerConnection, ConsumeStats, OffsetWrapper
from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import MessageQueue, Topic
from engine.protocol.body.route import BrokerAddr, BrokerData, BrokerName, ClusterName
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.signature import Credentials
from engine.remoting.client import RemotingClient

T = TypeVar("T")

RETRY_PREFIX = "%RETRY%"


def retry_topic(group: GroupName) -> Topic:
    """`%RETRY%<group>`: its route names every broker the group's consumers talk to."""
    return RETRY_PREFIX + group


def select_addr(data: BrokerData) -> BrokerAddr | None:
    """The master's address, else the lowest-numbered slave's (None without any)."""
    master = data.master_addr()
    if master is not None:
        return master
    return data.broker_addrs[min(data.broker_addrs)] if data.broker_addrs else None


def merge_consume_stats(outcomes: Sequence[ServerOutcome[ConsumeStats]]) -> ConsumeStats:
    """One `ConsumeStats` from the brokers that answered: queues joined, TPS summed."""
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    for outcome in outcomes:
        if outcome.value is not None:
            table.update(outcome.value.offset_table)
            tps += outcome.value.consume_tps
    return ConsumeStats(dict(sorted(table.items())), tps)


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """What `delete_topic` did on each master broker, then on each name server; `slaves`
    does not count towards `ok` (a 4.9 slave refuses and drops it at its next sync)."""

    brokers: list[ServerOutcome[None]] = field(default_factory=list)
    namesrvs: list[ServerOutcome[None]] = field(default_factory=list)
    slaves: list[ServerOutcome[None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in (*self.brokers, *self.namesrvs))


class MQAdmin:
    """Name servers and brokers behind one object: ``async with MQAdmin(addrs) as admin``."""

    def __init__(self, namesrv_addrs: str | Sequence[str], *,
                 timeout: float = DEFAULT_TIMEOUT, client: RemotingClient | None = None,
                 credentials: Credentials | None = None) -> None:
        """
        Args:
            namesrv_addrs: ``host:port`` addresses, or one ``;``-separated string.
            timeout: seconds to connect, and to wait for each answer.
            client: a client to share; by default the admin opens (and closes) its own.
            credentials: sign every request with them (brokers with access control on).

        Raises:
            InvalidAddressError: a name-server address is not ``host:port``, or none given.
        """
        self._own_client = client is None
        self.client = client if client is not None else RemotingClient(
            connect_timeout=timeout, credentials=credentials)
        self.namesrv = NamesrvAdmin(namesrv_addrs, timeout=timeout, client=self.client)
        self.broker = BrokerAdmin(self.client, timeout)

    async def __aenter__(self) -> MQAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_client:
            await self.client.close()

    async def on_brokers(self, addrs: Sequence[BrokerAddr],
                         call: Callable[[BrokerAddr], Awaitable[T]]) -> list[ServerOutcome[T]]:
        """`call(addr)` on every broker at once; one outcome per address, in order.  Only
        `ClientError`s are caught; anything else propagates."""

        async def one(addr: BrokerAddr) -> ServerOutcome[T]:
            try:
                return ServerOutcome(addr, await call(addr))
            except ClientError as exc:
                return ServerOutcome(addr, error=exc)

        return list(await asyncio.gather(*(one(a) for a in addrs)))

    # ------------------------------------------------------------------------ clusters

    async def master_addrs(self, cluster: ClusterName | None = None
                           ) -> dict[BrokerName, BrokerAddr]:
        """The master of each broker of `cluster` (of every cluster when None), by broker
        name; empty when the name servers know no such cluster or it has no master online.

        Raises:
            UnreachableError: no name server answered.
        """
        info = await self.namesrv.cluster_info()
        if cluster is None:
            names = set(info.broker_addr_table)
        else:
            names = set(info.cluster_addr_table.get(cluster, ()))
        masters: dict[BrokerName, BrokerAddr] = {}
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            addr = data.master_addr() if data is not None else None
            if addr is not None:
                masters[name] = addr
        return masters

    async def create_topic_on_cluster(self, cluster: ClusterName,
                                      config: TopicConfig) -> list[ServerOutcome[None]]:
        """Create (or update) the topic on every master of `cluster`; no outcome at all when
        the cluster has no master (see `master_addrs`)."""
        masters = await self.master_addrs(cluster)
        return await self.on_brokers(list(masters.values()),
                                     lambda addr: self.broker.create_topic(addr, config))

    async def create_group_on_cluster(self, cluster: ClusterName, config: SubscriptionGroupConfig
                                      ) -> list[ServerOutcome[None]]:
        """Create (or update) the subscription group on every master of `cluster`."""
        masters = await self.master_addrs(cluster)
        return await self.on_brokers(list(masters.values()),
                                     lambda addr: self.broker.create_group(addr, config))

    async def delete_topic(self, topic: Topic, *,
                           cluster: ClusterName | None = None) -> TopicDeletion:
        """Delete the topic on every master (of `cluster`, or of every cluster), then on
        their slaves, then its route on every name server.  Apache's ``mqadmin
        deleteTopic`` skips the slaves (and a 4.9 slave refuses; it drops the topic at its
        next metadata sync), but a slave promoted before that sync must not have it."""
        masters = await self.master_addrs(cluster)
        brokers = await self.on_brokers(list(masters.values()),
                                        lambda addr: self.broker.delete_topic(addr, topic))
        info = await self.namesrv.cluster_info()
        slaves = [addr for name in masters
                  if (data := info.broker_addr_table.get(name)) is not None
                  for broker_id, addr in sorted(data.broker_addrs.items()) if broker_id != 0]
        on_slaves = await self.on_brokers(slaves,
                                          lambda addr: self.broker.delete_topic(addr, topic))
        namesrvs = await self.namesrv.on_each(
            lambda addr: self.namesrv.delete_topic(topic, cluster=cluster, addr=addr))
        return TopicDeletion(brokers, namesrvs, on_slaves)

    # ------------------------------------------------------------------------ consumers

    async def route_addrs(self, topic: Topic) -> list[BrokerAddr]:
        """One address per broker of the topic's route (`select_addr`).

        Raises:
            TopicNotExistError: the name servers know no route for the topic.
        """
        route = await self.namesrv.topic_route(topic)
        addrs = (select_addr(data) for data in route.broker_datas)
        return [addr for addr in addrs if addr is not None]

    async def consume_stats(self, group: GroupName,
                            topic: Topic | None = None) -> list[ServerOutcome[ConsumeStats]]:
        """The group's consume stats from every broker of `topic`'s route (of its retry
        topic's route when None, as Apache does); `merge_consume_stats` joins them.

        Raises:
            TopicNotExistError: no route (for the retry topic: no consumer of the group
                was ever online).
        """
        addrs = await self.route_addrs(topic if topic else retry_topic(group))
        return await self.on_brokers(
            addrs, lambda addr: self.broker.consume_stats(addr, group, topic))

    async def consumer_connections(self, group: GroupName) -> ConsumerConnection:
        """The group's clients and subscriptions, from the first broker of its retry topic's
        route that knows them (consumers heartbeat to every broker).

        Raises:
            TopicNotExistError: no consumer of the group was ever online.
            ConsumerNotOnlineError: none is online now.
            ClientError: the last broker's error when none answered.
        """
        addrs = await self.route_addrs(retry_topic(group))
        error: ClientError | None = None
        for addr in addrs:
            try:
                return await self.broker.consumer_connections(addr, group)
            except ClientError as exc:
                error = exc
        if error is None:  # a route without a broker address
            return ConsumerConnection()
        raise error
