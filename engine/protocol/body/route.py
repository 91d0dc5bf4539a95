"""Route bodies of the name server: `TopicRouteData`, `ClusterInfo`, `TopicList`, `KVTable`."""

from __future__ import annotations

from dataclasses import dataclass, field

BrokerName = str
ClusterName = str
BrokerAddr = str  # "ip:port"
BrokerId = int  # 0 = master, > 0 slave

MASTER_ID: BrokerId = 0


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: BrokerName
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: ClusterName
    broker_name: BrokerName
    broker_addrs: dict[BrokerId, BrokerAddr] = field(default_factory=dict)

    def master_addr(self) -> BrokerAddr | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[BrokerAddr, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    broker_addr_table: dict[BrokerName, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[ClusterName, set[BrokerName]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: BrokerAddr | None = None


@dataclass(frozen=True, slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)
