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
import threading
from typing import Any, TypeVar

from engine.protocol import fastjson
from engine.protocol.body.subscription import SubscriptionGroupWrapper
from engine.protocol.body.topic import TopicConfigSerializeWrapper
from engine.protocol.errors import ProtocolError
from engine.protocol.wire import from_json, to_json
from engine.store.errors import ConfigFileError

TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
DELAY_OFFSET_JSON = "delayOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"


class JsonConfigFile:
    """One JSON file with atomic replacement and a `.bak` fallback."""

    def __init__(self, path: str) -> None:
        self.path = path
        # Writes from two threads at once (a worker's periodic persist and a stop's) would
        # share the .tmp file: one at a time.
        self._lock = threading.Lock()

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
        with self._lock:
            self._write(fastjson.dumps(value, pretty=True))

    def _write(self, text: str) -> None:
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


# ------------------------------------------------------------------------- files


class ConfigFiles:
    """The four files under `<root>/config/`, in the protocol's own value types."""

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir
        self.topics = JsonConfigFile(os.path.join(config_dir, TOPICS_JSON))
        self.consumer_offsets = JsonConfigFile(os.path.join(config_dir, CONSUMER_OFFSET_JSON))
        self.delay_offsets = JsonConfigFile(os.path.join(config_dir, DELAY_OFFSET_JSON))
        self.subscription_groups = JsonConfigFile(
            os.path.join(config_dir, SUBSCRIPTION_GROUP_JSON)
        )

    # topics.json
    def save_topics(self, wrapper: TopicConfigSerializeWrapper) -> None:
        self.topics.persist(to_json(wrapper))

    def load_topics(self) -> TopicConfigSerializeWrapper | None:
        d = self.topics.load()
        return None if d is None else _decode(TopicConfigSerializeWrapper, d, self.topics)

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
    def save_subscription_groups(self, wrapper: SubscriptionGroupWrapper) -> None:
        self.subscription_groups.persist(to_json(wrapper))

    def load_subscription_groups(self) -> SubscriptionGroupWrapper | None:
        d = self.subscription_groups.load()
        return (None if d is None
                else _decode(SubscriptionGroupWrapper, d, self.subscription_groups))


T = TypeVar("T")


def _decode(cls: type[T], doc: Any, file: JsonConfigFile) -> T:
    try:
        return from_json(cls, doc)
    except ProtocolError as exc:
        raise ConfigFileError(f"{file.path}: {exc}") from None
