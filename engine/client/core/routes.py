"""`RouteTable`: the topic routes a client instance knows and the broker addresses in them.

How this works: each route fetched from a name server replaces the topic's previous one and
refreshes what is derived from it - the publish queues producers pick from, the subscribe
queues consumers rebalance over, and the broker-name -> {brokerId: address} table every
request is addressed through (`MQClientInstance.brokerAddrTable`).  A broker is forgotten
only when no route names it any more (`cleanOfflineBroker`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine.client.core.publish import TopicPublishInfo, publish_info, subscribe_queues
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import MASTER_ID, BrokerData, QueueData, TopicRouteData


@dataclass(frozen=True, slots=True)
class BrokerAddr:
    """An address to send to, and whether it is a slave (`FindBrokerResult`)."""

    addr: str
    slave: bool = False


def _normalized(route: TopicRouteData) -> tuple[object, ...]:
    def qd(q: QueueData) -> tuple[object, ...]:
        return (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)

    def bd(b: BrokerData) -> tuple[object, ...]:
        return (b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items())))

    return (tuple(sorted(map(qd, route.queue_datas))), tuple(sorted(map(bd, route.broker_datas))),
            route.order_topic_conf)


class RouteTable:
    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.publish: dict[str, TopicPublishInfo] = {}
        self.subscribe: dict[str, frozenset[MessageQueue]] = {}
        self.brokers: dict[str, dict[int, str]] = {}

    def put(self, topic: str, route: TopicRouteData) -> bool:
        """Store a freshly fetched route; True when it differs from the one held."""
        old = self.routes.get(topic)
        changed = old is None or _normalized(old) != _normalized(route)
        self.routes[topic] = route
        for broker in route.broker_datas:
            self.brokers[broker.broker_name] = dict(broker.broker_addrs)
        if changed or topic not in self.publish:
            self.publish[topic] = publish_info(topic, route)
            self.subscribe[topic] = subscribe_queues(topic, route)
        return changed

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        return self.publish.get(topic)

    def subscribe_queues(self, topic: str) -> frozenset[MessageQueue]:
        return self.subscribe.get(topic, frozenset())

    def master_addr(self, broker_name: str) -> str | None:
        """`findBrokerAddressInPublish`."""
        return self.brokers.get(broker_name, {}).get(MASTER_ID)

    def subscribe_addr(self, broker_name: str, broker_id: int = MASTER_ID,
                       only_this: bool = False) -> BrokerAddr | None:
        """`findBrokerAddressInSubscribe`: that broker id, else (unless `only_this`) any."""
        addrs = self.brokers.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is not None:
            return BrokerAddr(addr, broker_id != MASTER_ID)
        if only_this:
            return None
        some_id = min(addrs)
        return BrokerAddr(addrs[some_id], some_id != MASTER_ID)

    def any_addr_of_topic(self, topic: str) -> str | None:
        """`findBrokerAddrByTopic`: a random broker of the route, its master if it has one."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        broker = random.choice(route.broker_datas)
        addr = broker.broker_addrs.get(MASTER_ID)
        if addr is None and broker.broker_addrs:
            addr = next(iter(broker.broker_addrs.values()))
        return addr

    def addresses(self, masters_only: bool) -> list[tuple[str, int, str]]:
        """(broker name, broker id, address) of every known broker (masters only if asked)."""
        return [(name, bid, addr) for name, addrs in sorted(self.brokers.items())
                for bid, addr in sorted(addrs.items()) if not masters_only or bid == MASTER_ID]

    def clean_offline(self) -> list[str]:
        """Forget brokers no route names; returns the addresses dropped."""
        live: dict[str, set[str]] = {}
        for route in self.routes.values():
            for broker in route.broker_datas:
                live.setdefault(broker.broker_name, set()).update(broker.broker_addrs.values())
        dropped: list[str] = []
        for name in list(self.brokers):
            addrs = self.brokers[name]
            keep = {bid: a for bid, a in addrs.items() if a in live.get(name, ())}
            dropped.extend(a for a in addrs.values() if a not in keep.values())
            if keep:
                self.brokers[name] = keep
            else:
                del self.brokers[name]
        return dropped
