"""Offset tables a slave copies from its master: consumer offsets and delay-level offsets.

Both use integer map keys, which fastjson writes unquoted:
`{"offsetTable":{"TopicTest@CG":{0:10,1:12}}}` and `{"offsetTable":{1:2,3:5}}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import QueueId, Topic

TopicAtGroup = str  # "<topic>@<group>"
DelayLevel = int
Offset = int

TOPIC_GROUP_SEPARATOR = "@"


def topic_at_group(topic: Topic, group: GroupName) -> TopicAtGroup:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_topic_at_group(key: TopicAtGroup) -> tuple[Topic, GroupName] | None:
    """`"T@G"` -> `("T", "G")`; None unless there is exactly one separator, as Java checks."""
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


@dataclass(frozen=True, slots=True)
class ConsumerOffsetSerializeWrapper:
    """GET_ALL_CONSUMER_OFFSET answer (and the broker's consumerOffset.json)."""

    offset_table: dict[TopicAtGroup, dict[QueueId, Offset]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DelayOffsetSerializeWrapper:
    """GET_ALL_DELAY_OFFSET answer (and the broker's delayOffset.json)."""

    offset_table: dict[DelayLevel, Offset] = field(default_factory=dict)
