"""Every group's committed offsets and lag per queue from GET_BROKER_CONSUME_STATS, one request
per broker: brokerConsumeStats reads one broker, the dashboard every master."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.admin import ConsumeStatsList, OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.header.broker import GetConsumeStatsInBrokerHeader
from engine.protocol.wire import to_ext
from mqadmin.operations.stats_bodies import decode_broker_consume_stats


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
    #: Each answering broker's answer, by its address.
    answers: dict[str, ConsumeStatsList] = field(default_factory=dict)

    def tables(self, names: Mapping[str, str]
               ) -> dict[tuple[str, str], dict[MessageQueue, OffsetWrapper]]:
        """Each (group, broker name)'s queues (empty for a group without offsets there),
        for the brokers of `names` (broker name -> the address read) that answered."""
        found: dict[tuple[str, str], dict[MessageQueue, OffsetWrapper]] = {}
        for name, addr in names.items():
            answer = self.answers.get(addr)
            if answer is None:
                continue
            for entry in answer.consume_stats_list:
                for group, per_topic in entry.items():
                    table = found.setdefault((group, name), {})
                    for consume in per_topic:
                        table.update(consume.offset_table)
        return found


async def broker_consume_stats(admin: MQAdmin, addr: str) -> ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS of the broker at `addr`, as
    `BrokerAdmin.broker_consume_stats` with the quick decoder.

    Raises:
        ClientError: as `BrokerAdmin.broker_consume_stats`.
    """
    header = to_ext(GetConsumeStatsInBrokerHeader(False))
    resp = await admin.broker._call(addr, RequestCode.GET_BROKER_CONSUME_STATS, header,
                                    timeout=admin.broker.relayed_timeout)
    return decode_broker_consume_stats(resp.body, addr)


async def read_lags(admin: MQAdmin, addrs: Sequence[str]) -> Lags:
    """The queues of every group on the brokers at `addrs`."""
    outcomes = await admin.on_brokers(addrs, lambda addr: broker_consume_stats(admin, addr))
    rows: list[QueueLag] = []
    groups: set[str] = set()
    for outcome in outcomes:
        if outcome.value is not None:
            rows += queue_lags(outcome.value)
            groups.update(g for entry in outcome.value.consume_stats_list for g in entry)
    failed = [f"{o.addr}: {str(o.error).splitlines()[0]}" for o in outcomes if o.error]
    return Lags(rows, groups, failed,
                {o.addr: o.value for o in outcomes if o.value is not None})
