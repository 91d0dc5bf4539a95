"""Every group's committed offsets and lag per queue from GET_BROKER_CONSUME_STATS, one request
per broker: brokerConsumeStats reads one broker, the dashboard every master."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from engine.protocol.body.admin import ConsumeStatsList


@dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue of one group as a broker reports it."""

    group: str
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int  # ms; 0: the queue never received a message
    group_tps: float  # the group's consume TPS on the topic, the same for its queues

    @property
    def diff(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


def queue_lags(stats: ConsumeStatsList) -> list[QueueLag]:
    """One value per (group, queue) of a broker's answer, in its order (queues sorted)."""
    return [QueueLag(group, mq.topic, mq.broker_name, mq.queue_id, w.broker_offset,
                     w.consumer_offset, w.last_timestamp, consume.consume_tps)
            for entry in stats.consume_stats_list for group, per_topic in entry.items()
            for consume in per_topic for mq, w in sorted(consume.offset_table.items())]


@dataclass(frozen=True, slots=True)
class Lags:
    rows: list[QueueLag]
    groups: set[str]  # every group the brokers know, with offsets or not
    failed: list[str]  # brokers that did not answer, with why


async def read_lags(admin: MQAdmin, addrs: Sequence[str]) -> Lags:
    """The queues of every group on the brokers at `addrs`."""
    outcomes = await admin.on_brokers(addrs, admin.broker.broker_consume_stats)
    rows: list[QueueLag] = []
    groups: set[str] = set()
    for outcome in outcomes:
        if outcome.value is not None:
            rows += queue_lags(outcome.value)
            groups.update(g for entry in outcome.value.consume_stats_list for g in entry)
    failed = [f"{o.addr}: {str(o.error).splitlines()[0]}" for o in outcomes if o.error]
    return Lags(rows, groups, failed)
