"""The Producers screen's data: a producer group's online clients, as producerConnection
reads them (mqadmin/operations/consumer.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.client.admin.cluster import MQAdmin
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations import consumer as consumer_ops

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProducersView:
    """A producer group's online clients, as producerConnection reads them."""

    group: str
    topic: str
    rows: list[Row]
    #: Why there are no rows (no broker of the topic knows a producer of the group).
    none: str = ""


async def read_producers(admin: MQAdmin, group: str, topic: str) -> ProducersView:
    """producerConnection: the group's clients known to the brokers of `topic`.

    Raises:
        TopicNotExistError: no route for the topic.
    """
    if not group or not topic:
        raise UsageProblem("name the producer group and a topic it sends to.")
    try:
        rows = await consumer_ops.producer_connection(admin, group, topic)
    except TargetNotFound as exc:
        return ProducersView(group, topic, [], str(exc))
    return ProducersView(group, topic, rows)
