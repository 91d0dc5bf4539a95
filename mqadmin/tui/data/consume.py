"""Every group's committed offsets and lag on every master, one request per broker
(GET_BROKER_CONSUME_STATS, as `brokerConsumeStats` reads it), flattened to queue rows."""

from __future__ import annotations

from dataclasses import dataclass

from engine.client.admin.cluster import MQAdmin, select_addr


@dataclass(frozen=True, slots=True)
class QueueLag:
    group: str
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    group_tps: float

    @property
    def diff(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


async def masters(admin: MQAdmin) -> dict[str, str]:
    """One address per broker name (the master, else a slave), and the cluster of each."""
    info = await admin.namesrv.cluster_info()
    return {name: addr for name, data in sorted(info.broker_addr_table.items())
            if (addr := select_addr(data)) is not None}


@dataclass(frozen=True, slots=True)
class Lags:
    rows: list[QueueLag]
    groups: set[str]  # every group the brokers know, with offsets or not
    failed: list[str]  # brokers that did not answer, with why


async def read_lags(admin: MQAdmin, addrs: list[str]) -> Lags:
    """Queue rows of every group on the brokers at `addrs`."""
    outcomes = await admin.on_brokers(addrs, admin.broker.broker_consume_stats)
    rows: list[QueueLag] = []
    groups: set[str] = set()
    for outcome in outcomes:
        if outcome.value is None:
            continue
        for entry in outcome.value.consume_stats_list:
            for group, per_topic in entry.items():
                groups.add(group)
                for stats in per_topic:
                    for mq, w in stats.offset_table.items():
                        rows.append(QueueLag(group, mq.topic, mq.broker_name, mq.queue_id,
                                             w.broker_offset, w.consumer_offset,
                                             w.last_timestamp, stats.consume_tps))
    failed = [f"{o.addr}: {str(o.error).splitlines()[0]}" for o in outcomes if o.error]
    return Lags(rows, groups, failed)
