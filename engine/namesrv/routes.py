"""The name server's route tables (`RouteInfoManager`): plain state, no I/O, injectable clock.

How this works: five tables, as in 4.9.7 —
  topics    topic -> broker name -> QueueData (only masters' registrations write it)
  brokers   broker name -> cluster + {brokerId: addr}
  clusters  cluster -> broker names
  live      broker addr -> last heartbeat, DataVersion, HA addr, connection key
  filters   broker addr -> filter server addrs
A broker name disappears with its last address; then it leaves its cluster (an emptied
cluster disappears) and its queue datas leave every topic (an emptied topic disappears).
The connection key is whatever the caller uses to recognise a connection; the tables only
compare it, so the asyncio side stays out of here.  Lists that Java builds from hash sets
come out sorted here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.protocol.body.route import (
    MASTER_ID,
    BrokerAddr,
    BrokerData,
    BrokerId,
    BrokerName,
    ClusterInfo,
    ClusterName,
    QueueData,
    TopicList,
    TopicRouteData,
)
from engine.protocol.body.topic import DataVersion, TopicConfigSerializeWrapper
from engine.protocol.perm import PERM_READ, PERM_WRITE

Clock = Callable[[], int]  # milliseconds
ConnKey = object  # compared by identity
Topic = str

BROKER_CHANNEL_EXPIRED_MS = 120_000
FLAG_UNIT = 0x1  # TopicSysFlag
FLAG_UNIT_SUB = 0x2


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    conn_key: ConnKey | None = None


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a registering slave learns about its master (both None for a master)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class _BrokerGroup:
    cluster: ClusterName
    addrs: dict[BrokerId, BrokerAddr] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExpiredBroker:
    addr: BrokerAddr
    conn_key: ConnKey | None


class RouteTable:
    """Route state of one name server; every method runs to completion without awaiting."""

    def __init__(self, clock: Clock = wall_clock_ms,
                 expiry_ms: int = BROKER_CHANNEL_EXPIRED_MS) -> None:
        self.clock = clock
        self.expiry_ms = expiry_ms
        self.topics: dict[Topic, dict[BrokerName, QueueData]] = {}
        self.brokers: dict[BrokerName, _BrokerGroup] = {}
        self.clusters: dict[ClusterName, set[BrokerName]] = {}
        self.live: dict[BrokerAddr, BrokerLiveInfo] = {}
        self.filters: dict[BrokerAddr, list[str]] = {}
        #: Bumped by every change to the route tables, so readers may cache what they derive.
        self.generation = 0

    # ------------------------------------------------------------------ registration

    def register_broker(
        self,
        cluster: ClusterName,
        addr: BrokerAddr,
        name: BrokerName,
        broker_id: BrokerId,
        ha_server_addr: str,
        wrapper: TopicConfigSerializeWrapper,
        filter_servers: list[str] | None = None,
        conn_key: ConnKey | None = None,
    ) -> RegisterResult:
        """REGISTER_BROKER (request-codes.md §3.7)."""
        self.generation += 1
        self.clusters.setdefault(cluster, set()).add(name)
        group = self.brokers.get(name)
        first = group is None
        if group is None:
            group = self.brokers[name] = _BrokerGroup(cluster)
        # The same address under another id (slave -> master switch): one entry per address.
        for other_id in [i for i, a in group.addrs.items() if a == addr and i != broker_id]:
            del group.addrs[other_id]
        old_addr = group.addrs.get(broker_id)
        group.addrs[broker_id] = addr
        first = first or old_addr is None

        if broker_id == MASTER_ID and (first or self.is_data_version_changed(
                addr, wrapper.data_version)):
            for config in wrapper.topic_config_table.values():
                self.topics.setdefault(config.topic_name, {})[name] = QueueData(
                    broker_name=name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=config.perm,
                    topic_sys_flag=config.topic_sys_flag,
                )
        self.live[addr] = BrokerLiveInfo(self.clock(), wrapper.data_version, ha_server_addr,
                                         conn_key)
        if filter_servers is not None:
            if filter_servers:
                self.filters[addr] = list(filter_servers)
            else:
                self.filters.pop(addr, None)

        if broker_id != MASTER_ID:
            master = group.addrs.get(MASTER_ID)
            master_live = self.live.get(master) if master is not None else None
            if master_live is not None:
                return RegisterResult(master_live.ha_server_addr, master)
        return RegisterResult()

    def is_data_version_changed(self, addr: BrokerAddr, version: DataVersion) -> bool:
        return self.data_version_of(addr) != version

    def data_version_of(self, addr: BrokerAddr) -> DataVersion | None:
        info = self.live.get(addr)
        return info.data_version if info is not None else None

    def touch(self, addr: BrokerAddr) -> None:
        """Refresh a live broker's heartbeat (QUERY_DATA_VERSION with an unchanged version)."""
        info = self.live.get(addr)
        if info is not None:
            self.live[addr] = replace(info, last_update_ms=self.clock())

    def unregister_broker(self, cluster: ClusterName, addr: BrokerAddr, name: BrokerName,
                          broker_id: BrokerId) -> None:
        """UNREGISTER_BROKER: drop one address; the broker name goes with its last one."""
        self.generation += 1
        self.live.pop(addr, None)
        self.filters.pop(addr, None)
        group = self.brokers.get(name)
        if group is None:
            return
        group.addrs.pop(broker_id, None)
        if group.addrs:
            return
        del self.brokers[name]
        names = self.clusters.get(cluster)
        if names is not None:
            names.discard(name)
            if not names:
                del self.clusters[cluster]
        self._remove_topics_of(name)

    # ------------------------------------------------------------------ liveness

    def scan_not_active(self) -> list[ExpiredBroker]:
        """Drop brokers silent for longer than the expiry; returns them so their
        connections can be closed."""
        now = self.clock()
        expired = [ExpiredBroker(addr, info.conn_key) for addr, info in self.live.items()
                   if info.last_update_ms + self.expiry_ms < now]
        for broker in expired:
            del self.live[broker.addr]
            self._destroy(broker.addr)
        return expired

    def on_connection_closed(self, remote_addr: str, conn_key: ConnKey | None) -> None:
        """A connection closed: if a broker registered over it, forget that broker's address
        (the connection's remote address is used when none did, as 4.9.7 does)."""
        found = None
        if conn_key is not None:
            found = next((a for a, i in self.live.items() if i.conn_key is conn_key), None)
        self._destroy(found or remote_addr)

    def _destroy(self, addr: BrokerAddr) -> None:
        if not addr:
            return
        self.generation += 1
        self.live.pop(addr, None)
        self.filters.pop(addr, None)
        name_found: BrokerName | None = None
        removed_name = False
        for name, group in list(self.brokers.items()):
            for broker_id, broker_addr in list(group.addrs.items()):
                if broker_addr == addr:
                    name_found = name
                    del group.addrs[broker_id]
                    break
            if not group.addrs:
                del self.brokers[name]
                removed_name = True
            if name_found is not None:
                break
        if name_found is None or not removed_name:
            return
        for cluster, names in list(self.clusters.items()):
            if name_found in names:
                names.discard(name_found)
                if not names:
                    del self.clusters[cluster]
                break
        self._remove_topics_of(name_found)

    def _remove_topics_of(self, name: BrokerName) -> None:
        for topic, queues in list(self.topics.items()):
            queues.pop(name, None)
            if not queues:
                del self.topics[topic]

    # ------------------------------------------------------------------ admin mutations

    def delete_topic(self, topic: Topic, cluster: ClusterName | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its queues on `cluster`'s brokers."""
        self.generation += 1
        if not cluster:
            self.topics.pop(topic, None)
            return
        names = self.clusters.get(cluster)
        queues = self.topics.get(topic)
        if not names or queues is None:
            return
        for name in names:
            queues.pop(name, None)
        if not queues:
            del self.topics[topic]

    def wipe_write_perm(self, name: BrokerName) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear PERM_WRITE on the broker's queues; topic count.

        Kept until the master registers a changed DataVersion (an unchanged one does not
        rewrite the queue datas), as in 4.9.7."""
        return self._set_perm(name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, name: BrokerName) -> int:
        """ADD_WRITE_PERM_OF_BROKER: perm becomes exactly R|W (4.9.7); topic count."""
        return self._set_perm(name, lambda perm: PERM_READ | PERM_WRITE)

    def _set_perm(self, name: BrokerName, change: Callable[[int], int]) -> int:
        self.generation += 1
        count = 0
        for queues in self.topics.values():
            queue = queues.get(name)
            if queue is not None:
                queues[name] = replace(queue, perm=change(queue.perm))
                count += 1
        return count

    # ------------------------------------------------------------------ reads

    def broker_data(self, name: BrokerName) -> BrokerData | None:
        group = self.brokers.get(name)
        if group is None:
            return None
        return BrokerData(group.cluster, name, dict(sorted(group.addrs.items())))

    def pickup_route(self, topic: Topic) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC's route, or None when the topic or its brokers are unknown."""
        queues = self.topics.get(topic)
        if queues is None:
            return None
        broker_datas: list[BrokerData] = []
        filter_table: dict[BrokerAddr, list[str]] = {}
        for name in sorted(queues):
            data = self.broker_data(name)
            if data is None:
                continue
            broker_datas.append(data)
            for addr in data.broker_addrs.values():
                servers = self.filters.get(addr)
                if servers is not None:
                    filter_table[addr] = list(servers)
        if not broker_datas:
            return None
        return TopicRouteData(
            queue_datas=[queues[name] for name in sorted(queues)],
            broker_datas=broker_datas,
            filter_server_table=filter_table,
        )

    def cluster_info(self) -> ClusterInfo:
        table = {name: data for name in sorted(self.brokers)
                 if (data := self.broker_data(name)) is not None}
        return ClusterInfo(table, {c: set(names) for c, names in self.clusters.items()})

    def all_topics(self) -> TopicList:
        return TopicList(sorted(self.topics))

    def topics_by_cluster(self, cluster: ClusterName) -> TopicList:
        """Topics with a queue on any broker of `cluster` (empty for an unknown cluster)."""
        names = self.clusters.get(cluster, set())
        return TopicList(sorted(t for t, queues in self.topics.items()
                                if any(n in queues for n in names)))

    def system_topics(self) -> TopicList:
        """Cluster names and broker names, with the address of one broker (as 4.9.7)."""
        found: set[str] = set()
        for cluster, names in self.clusters.items():
            found.add(cluster)
            found.update(names)
        addr = None
        for name in sorted(self.brokers):
            addrs = self.brokers[name].addrs
            if addrs:
                addr = addrs[min(addrs)]
                break
        return TopicList(sorted(found), addr)

    def unit_topics(self) -> TopicList:
        return self._by_sys_flag(lambda flag: bool(flag & FLAG_UNIT))

    def has_unit_sub_topics(self) -> TopicList:
        return self._by_sys_flag(lambda flag: bool(flag & FLAG_UNIT_SUB))

    def has_unit_sub_ununit_topics(self) -> TopicList:
        return self._by_sys_flag(lambda flag: not flag & FLAG_UNIT and bool(flag & FLAG_UNIT_SUB))

    def _by_sys_flag(self, pick: Callable[[int], bool]) -> TopicList:
        # 4.9.7 looks at one queue data per topic only.
        return TopicList(sorted(
            topic for topic, queues in self.topics.items()
            if queues and pick(queues[min(queues)].topic_sys_flag)
        ))
