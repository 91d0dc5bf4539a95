"""Topic configuration bodies: `TopicConfig`, `DataVersion`, `TopicConfigSerializeWrapper`."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, replace

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

    def encode_compact(self) -> str:
        """`TopicConfig.encode()`: the space-separated form inside compressed registrations."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type.name}"
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        """Parse `encode_compact` output; a 5.x sixth field (attributes JSON) is ignored.

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
            )
        except (ValueError, KeyError):
            raise BodyError(f"compact topic config {text!r} is malformed") from None

    def with_perm(self, perm: int) -> TopicConfig:
        return replace(self, perm=perm)


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
