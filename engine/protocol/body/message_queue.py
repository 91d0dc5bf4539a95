"""`MessageQueue`: one queue of a topic on one broker, the key of most offset tables."""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.body.route import BrokerName
from engine.protocol.wire import Int32

Topic = str
QueueId = Int32


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """Hashable and ordered as Java's `compareTo`: topic, then brokerName, then queueId.

    JSON: `{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}`; as a map key fastjson
    writes that object unquoted (`wire.to_json` does this for any dataclass key).
    """

    topic: Topic
    broker_name: BrokerName
    queue_id: QueueId

    def __str__(self) -> str:
        return (f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
                f"queueId={self.queue_id}]")
