"""`MQAdmin`: the cluster-wide operations operators run, over `NamesrvAdmin` and `BrokerAdmin`.

How this works: the name servers say which brokers are involved (a cluster's masters from
the cluster info, or the brokers of a topic's route), then every broker is called at once
and each one's result or error is kept as a `ServerOutcome`, so a caller can show partial
success instead of stopping at the first failure.  Mutations go to masters only: slaves copy
topics, groups and offsets from their master.  Reads that the route names a broker for use
its master, or its lowest-numbered slave while the master is away (`selectBrokerAddr`).
A consumer group is found from the brokers themselves (every broker's consume stats, client
connections and group configs), not from its ``%RETRY%<group>`` route alone: a 5.x POP group
has no such topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.broker_call import DEFAULT_TIMEOUT
from engine.client.core.errors import (
    ClientError,
    ConsumerNotOnlineError,
    GroupNotFoundError,
    TopicNotExistError,
)
from engine.client.core.namesrv import NamesrvAdmin, ServerOutcome
from engine.protocol.body.admin import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
)
from engine.protocol.body.heartbeat import GroupName, SubscriptionData
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

    async def broker_addrs(self) -> dict[BrokerName, BrokerAddr]:
        """One address per registered broker name, of every cluster (`select_addr`)."""
        info = await self.namesrv.cluster_info()
        return {name: addr for name, data in sorted(info.broker_addr_table.items())
                if (addr := select_addr(data)) is not None}

    async def _retry_route_addrs(self, group: GroupName) -> list[BrokerAddr]:
        try:
            return await self.route_addrs(retry_topic(group))
        except TopicNotExistError:
            return []

    async def group_known(self, group: GroupName, addrs: Sequence[BrokerAddr] = ()) -> bool:
        """Whether any broker knows the group: its retry topic has a route, a client of it
        is online, it has committed offsets, or a broker keeps its config (asked in that
        order, of every broker when `addrs` is empty)."""
        if await self._retry_route_addrs(group):
            return True
        addrs = list(addrs) or list((await self.broker_addrs()).values())
        connected = await self.on_brokers(
            addrs, lambda addr: self.broker.consumer_connections(addr, group))
        if any(o.ok for o in connected):
            return True
        stats = await self.on_brokers(addrs,
                                      lambda addr: self.broker.consume_stats(addr, group))
        if any(o.value is not None and o.value.offset_table for o in stats):
            return True
        configs = await self.on_brokers(addrs, self.broker.all_group_config)
        return any(o.value is not None and group in o.value.subscription_group_table
                   for o in configs)

    async def consume_stats(self, group: GroupName, topic: Topic | None = None, *,
                            known: bool = False) -> list[ServerOutcome[ConsumeStats]]:
        """The group's consume stats: from every broker of `topic`'s route; without a topic
        from every broker, keeping those where the group has offsets or that failed (a 5.x
        POP group has no ``%RETRY%<group>`` route to go by; Apache's mqadmin goes by it and
        does not find such a group).  `merge_consume_stats` joins them.  With `known` (the
        group came from the brokers' own tables) nothing found is no error.

        Raises:
            TopicNotExistError: `topic` has no route.
            GroupNotFoundError: no broker knows the group (`group_known`).
        """
        if topic:
            addrs = await self.route_addrs(topic)
            return await self.on_brokers(
                addrs, lambda addr: self.broker.consume_stats(addr, group, topic))
        addrs = list((await self.broker_addrs()).values())
        outcomes = await self.on_brokers(
            addrs, lambda addr: self.broker.consume_stats(addr, group))
        kept = [o for o in outcomes if o.error is not None
                or (o.value is not None and o.value.offset_table)]
        if not kept and not known and not await self.group_known(group, addrs):
            raise GroupNotFoundError(group)
        return kept

    async def group_connections(self, group: GroupName
                                ) -> list[ServerOutcome[ConsumerConnection]]:
        """The group's connection as every broker sees it (a client connects to the
        brokers its topics are on; a 5.x client through the proxy to those the proxy
        chose), one outcome per broker."""
        addrs = list((await self.broker_addrs()).values())
        return await self.on_brokers(
            addrs, lambda addr: self.broker.consumer_connections(addr, group))

    async def consumer_connections(
            self, group: GroupName,
            seen: Sequence[ServerOutcome[ConsumerConnection]] | None = None, *,
            known: bool = False) -> ConsumerConnection:
        """The group's clients and subscriptions, asked of every broker at once and
        joined (`join_connections`); `seen`: the `group_connections` read before; `known`:
        the group came from the brokers' own tables (offline: ConsumerNotOnlineError).

        Raises:
            GroupNotFoundError: no broker knows the group.
            ConsumerNotOnlineError: none is online now.
            ClientError: the last broker's error when none answered.
        """
        outcomes = seen if seen is not None else await self.group_connections(group)
        if any(o.ok for o in outcomes):
            return join_connections([o.value for o in outcomes if o.value is not None])
        errors = [o.error for o in outcomes if o.error is not None]
        if not errors:  # no broker registered
            raise GroupNotFoundError(group)
        if all(isinstance(e, ConsumerNotOnlineError) for e in errors) and not known and not (
                await self.group_known(group, [o.addr for o in outcomes])):
            raise GroupNotFoundError(group)
        raise errors[-1]


def join_connections(found: Sequence[ConsumerConnection]) -> ConsumerConnection:
    """One connection of the group from what each broker answered: every client once (the
    first broker's view of it), every subscription, the first broker's settings."""
    clients: dict[str, Connection] = {}
    subscriptions: dict[Topic, SubscriptionData] = {}
    for cc in found:
        for conn in sorted(cc.connection_set, key=lambda c: c.client_id):
            clients.setdefault(conn.client_id, conn)
        for topic, data in cc.subscription_table.items():
            subscriptions.setdefault(topic, data)
    first = found[0]
    return replace(first, connection_set=frozenset(clients.values()),
                   subscription_table=dict(sorted(subscriptions.items())))
