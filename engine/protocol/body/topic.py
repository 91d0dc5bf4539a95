"""Topic configuration bodies: `TopicConfig`, `DataVersion`, `TopicConfigSerializeWrapper`,
`TopicConfigAndQueueMapping` (GET_TOPIC_CONFIG)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.protocol.attributes import TopicMessageType, message_type_of
from engine.protocol.errors import BodyError
from engine.protocol.perm import PERM_RW


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version of a broker's topic table: `nextVersion()` bumps the counter and the time."""

    timestamp: int = 0
    counter: int = 0

    def next(self, now_ms: int | None = None) -> DataVersion:
        return DataVersion(
            timestamp=int(time.time() * 1000) if now_ms is None else now_ms,
            counter=self.counter + 1,
        )


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_RW
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    #: 5.x attributes (`message.type`, `queue.type`, ...; see `engine.protocol.attributes`).
    #: None when there are none, so the JSON stays 4.9's (5.3 writes `"attributes":{}`;
    #: both read an absent field as no attributes).
    attributes: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.attributes is not None and not self.attributes:  # {} and None are the same
            object.__setattr__(self, "attributes", None)

    @property
    def attribute_map(self) -> dict[str, str]:
        """The attributes, empty when there are none."""
        return dict(self.attributes or {})

    @property
    def message_type(self) -> TopicMessageType:
        """`getTopicMessageType()`: NORMAL when the topic has no `message.type` attribute."""
        return message_type_of(self.attributes or {})

    def encode_compact(self) -> str:
        """`TopicConfig.encode()`: the space-separated form inside compressed registrations.

        5.x appends the attributes as a sixth field, but a 4.9 name server refuses any line
        that has not exactly five, and no name server uses attributes: they are left out.
        """
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type.name}"
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        """Parse `encode_compact` output and a 5.x sixth field (the attributes' JSON), which
        is skipped when it does not parse, as Apache skips it.

        Raises:
            BodyError: fewer than five fields or non-numeric counts.
        """
        parts = text.split(" ")
        if len(parts) < 5:
            raise BodyError(f"compact topic config {text!r} has fewer than 5 fields")
        try:
            return cls(
                topic_name=parts[0],
                read_queue_nums=int(parts[1]),
                write_queue_nums=int(parts[2]),
                perm=int(parts[3]),
                topic_filter_type=TopicFilterType[parts[4]],
                attributes=_compact_attributes(parts[5]) if len(parts) >= 6 else None,
            )
        except (ValueError, KeyError):
            raise BodyError(f"compact topic config {text!r} is malformed") from None


def _compact_attributes(text: str) -> dict[str, str] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class TopicConfigAndQueueMapping(TopicConfig):
    """GET_TOPIC_CONFIG (351) answer: the topic's config and, for a static topic asked with
    `lo=true`, its queue mapping (this engine has no static topics: always absent)."""

    mapping_detail: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
