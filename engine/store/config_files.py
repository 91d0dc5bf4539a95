"""The broker's JSON config files (topics, consumer/delay offsets, groups) in RocketMQ's shapes.

How this works (ConfigManager / MixAll.string2File): `persist` writes `<file>.tmp`, fsyncs
it, keeps the previous content as `<file>.bak`, then renames `.tmp` over `<file>` and
fsyncs the directory, so a crash leaves either the old or the new file plus a good `.bak`.
`load` reads `<file>`, falling back to `<file>.bak` when it is missing, empty or
undecodable.  Text is fastjson's pretty format (TABs, unquoted integer map keys) through
`engine.protocol.fastjson`; unknown keys are ignored on read.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from engine.protocol import fastjson
from engine.protocol.errors import ProtocolError
from engine.store.errors import ConfigFileError

TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
DELAY_OFFSET_JSON = "delayOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"


class JsonConfigFile:
    """One JSON file with atomic replacement and a `.bak` fallback."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _read(self, path: str) -> Any | None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ConfigFileError(f"cannot read {path}: {e}") from e
        if not text.strip():
            return None
        try:
            return fastjson.loads(text)
        except (ProtocolError, ValueError):
            return None

    def load(self) -> Any | None:
        """The decoded content of the file (or its .bak); None when neither exists.

        Raises:
            ConfigFileError: the file exists but neither it nor the .bak decodes.
        """
        value = self._read(self.path)
        if value is not None:
            return value
        value = self._read(self.path + ".bak")
        if value is None and os.path.exists(self.path) and os.path.getsize(self.path) > 0:
            raise ConfigFileError(f"{self.path} and {self.path}.bak cannot be decoded")
        return value

    def persist(self, value: Any) -> None:
        """Write `value` atomically, keeping the previous content as `.bak`."""
        text = fastjson.dumps(value, pretty=True)
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(self.path) and os.path.getsize(self.path) > 0:
            shutil.copyfile(self.path, self.path + ".bak")
        os.replace(tmp, self.path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class DataVersion:
    timestamp: int = 0
    counter: int = 0

    def next(self, now_ms: int) -> DataVersion:
        return DataVersion(now_ms, self.counter + 1)

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, d: Any) -> DataVersion:
        d = d if isinstance(d, dict) else {}
        return cls(int(d.get("timestamp", 0)), int(d.get("counter", 0)))


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums,
        }  # fmt: skip

    @classmethod
    def from_json(cls, name: str, d: dict[str, Any]) -> TopicConfig:
        return cls(
            str(d.get("topicName", name)), int(d.get("readQueueNums", 16)),
            int(d.get("writeQueueNums", 16)), int(d.get("perm", 6)),
            str(d.get("topicFilterType", "SINGLE_TAG")), int(d.get("topicSysFlag", 0)),
            bool(d.get("order", False)),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id, "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable, "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times, "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }  # fmt: skip

    @classmethod
    def from_json(cls, name: str, d: dict[str, Any]) -> SubscriptionGroupConfig:
        return cls(
            str(d.get("groupName", name)), bool(d.get("consumeEnable", True)),
            bool(d.get("consumeFromMinEnable", True)),
            bool(d.get("consumeBroadcastEnable", True)), int(d.get("retryQueueNums", 1)),
            int(d.get("retryMaxTimes", 16)), int(d.get("brokerId", 0)),
            int(d.get("whichBrokerWhenConsumeSlowly", 1)),
            bool(d.get("notifyConsumerIdsChangedEnable", True)),
        )  # fmt: skip


# ------------------------------------------------------------------------- files


class ConfigFiles:
    """The four files under `<root>/config/`."""

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir
        self.topics = JsonConfigFile(os.path.join(config_dir, TOPICS_JSON))
        self.consumer_offsets = JsonConfigFile(os.path.join(config_dir, CONSUMER_OFFSET_JSON))
        self.delay_offsets = JsonConfigFile(os.path.join(config_dir, DELAY_OFFSET_JSON))
        self.subscription_groups = JsonConfigFile(
            os.path.join(config_dir, SUBSCRIPTION_GROUP_JSON)
        )

    # topics.json
    def save_topics(self, version: DataVersion, table: dict[str, TopicConfig]) -> None:
        self.topics.persist({
            "dataVersion": version.to_json(),
            "topicConfigTable": {name: t.to_json() for name, t in table.items()},
        })  # fmt: skip

    def load_topics(self) -> tuple[DataVersion, dict[str, TopicConfig]]:
        d = self.topics.load() or {}
        table = d.get("topicConfigTable") or {}
        return DataVersion.from_json(d.get("dataVersion")), {
            str(k): TopicConfig.from_json(str(k), v) for k, v in table.items()
        }

    # consumerOffset.json: "<topic>@<group>" -> {queueId: offset}
    def save_consumer_offsets(self, table: dict[str, dict[int, int]]) -> None:
        self.consumer_offsets.persist({"offsetTable": table})

    def load_consumer_offsets(self) -> dict[str, dict[int, int]]:
        d = self.consumer_offsets.load() or {}
        return {
            str(k): {int(q): int(o) for q, o in v.items()}
            for k, v in (d.get("offsetTable") or {}).items()
        }

    # delayOffset.json: delay level -> next offset of SCHEDULE_TOPIC_XXXX queue level-1
    def save_delay_offsets(self, table: dict[int, int]) -> None:
        self.delay_offsets.persist({"offsetTable": table})

    def load_delay_offsets(self) -> dict[int, int]:
        d = self.delay_offsets.load() or {}
        return {int(k): int(v) for k, v in (d.get("offsetTable") or {}).items()}

    # subscriptionGroup.json
    def save_subscription_groups(
        self, version: DataVersion, table: dict[str, SubscriptionGroupConfig]
    ) -> None:
        self.subscription_groups.persist({
            "dataVersion": version.to_json(),
            "subscriptionGroupTable": {name: g.to_json() for name, g in table.items()},
        })  # fmt: skip

    def load_subscription_groups(self) -> tuple[DataVersion, dict[str, SubscriptionGroupConfig]]:
        d = self.subscription_groups.load() or {}
        table = d.get("subscriptionGroupTable") or {}
        return DataVersion.from_json(d.get("dataVersion")), {
            str(k): SubscriptionGroupConfig.from_json(str(k), v) for k, v in table.items()
        }
