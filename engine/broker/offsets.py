"""`ConsumerOffsetManager`: committed consumer offsets and consumerOffset.json.

Keys are ``"<topic>@<group>"`` and values ``{queueId: offset}``, the file shape RocketMQ uses
(unquoted integer keys).  The table is written every flushConsumerOffsetInterval by the
controller and at shutdown.  Only Java-sized numbers (int queue ids, long offsets) get in:
requests are refused at decode, and anything else (a hand-edited file, a master's table) is
dropped with a log line, so one bad entry never stops the others from being saved.
The topics of each group and the groups of each topic come from an index built from the
table's keys when first asked after the key set changed (consume stats ask for every group
on every request: a scan of the table per group made them quadratic in the groups).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

from engine.broker.persist import Persister
from engine.protocol.wire import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from engine.store.config_files import ConfigFiles

TOPIC_GROUP_SEPARATOR = "@"

log = logging.getLogger(__name__)


def valid_offsets(key: str, offsets: Mapping[int, int]) -> dict[int, int]:
    """The entries of `offsets` with a Java int queue id and a Java long offset."""
    good = {q: o for q, o in offsets.items()
            if type(q) is int and type(o) is int
            and INT32_MIN <= q <= INT32_MAX and INT64_MIN <= o <= INT64_MAX}
    if len(good) != len(offsets):
        log.error("consumer offsets of %s: dropped invalid entries %s", key,
                  {q: o for q, o in offsets.items() if q not in good})
    return good


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_key(key: str) -> tuple[str, str]:
    """``"topic@group"`` -> (topic, group); topic names cannot contain '@'."""
    topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
    return topic, group


class ConsumerOffsetManager:
    """Offsets by (topic, group, queue id); -1 means "no offset committed"."""

    def __init__(self, files: ConfigFiles) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.files = files
        self._by_group: dict[str, set[str]] = {}
        self._by_topic: dict[str, set[str]] = {}
        self._indexed: int | None = None  # len(table) when indexed; None: rebuild
        self._persister = Persister(lambda: {k: valid_offsets(k, v) for k, v in self.table.items()},
                                    files.save_consumer_offsets, "consumerOffset.json")

    def load(self) -> None:
        """Read consumerOffset.json (or its .bak).

        Raises:
            ConfigFileError: the file exists but cannot be decoded.
        """
        self.table.update((k, valid_offsets(k, v))
                          for k, v in self.files.load_consumer_offsets().items())

    def persist(self) -> None:
        self._persister.request()

    def flush(self) -> None:
        self._persister.flush()

    async def wait_persisted(self) -> None:
        await self._persister.wait()

    # ------------------------------------------------------------------ reads

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get(offset_key(topic, group), {}).get(queue_id, -1)

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(offset_key(topic, group), {}))

    def topics_of_group(self, group: str) -> set[str]:
        self._index()
        return set(self._by_group.get(group, ()))

    def groups_of_topic(self, topic: str) -> set[str]:
        self._index()
        return set(self._by_topic.get(topic, ()))

    def _index(self) -> None:
        """Rebuild the indexes when keys were added (the table only grows between the
        removals, which reset `_indexed`) or removed."""
        if self._indexed == len(self.table):
            return
        self._by_group, self._by_topic = {}, {}
        for topic, group in map(split_key, self.table):
            self._by_group.setdefault(group, set()).add(topic)
            self._by_topic.setdefault(topic, set()).add(group)
        self._indexed = len(self.table)

    def entries(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        for key, queues in self.table.items():
            topic, group = split_key(key)
            yield topic, group, queues

    # ------------------------------------------------------------------ writes

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Raises:
            ValueError: a queue id or offset outside Java's int / long."""
        if not (INT32_MIN <= queue_id <= INT32_MAX and INT64_MIN <= offset <= INT64_MAX):
            raise ValueError(f"offset {offset} of queue {queue_id} is outside Java's range")
        self.table.setdefault(offset_key(topic, group), {})[queue_id] = offset

    def set_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        key = offset_key(topic, group)
        self.table.setdefault(key, {}).update(valid_offsets(key, offsets))

    def clone(self, src_group: str, dest_group: str, topic: str) -> bool:
        """CLONE_GROUP_OFFSET for one topic; False when the source has no offsets there."""
        src = self.table.get(offset_key(topic, src_group))
        if src is None:
            return False
        self.table[offset_key(topic, dest_group)] = dict(src)
        return True

    def remove_group(self, group: str) -> int:
        keys = [offset_key(t, group) for t in self.topics_of_group(group)]
        for key in keys:
            del self.table[key]
        self._indexed = None
        return len(keys)

    def remove_topic(self, topic: str) -> int:
        keys = [offset_key(topic, g) for g in self.groups_of_topic(topic)]
        for key in keys:
            del self.table[key]
        self._indexed = None
        return len(keys)

    def replace_all(self, table: dict[str, dict[int, int]]) -> None:
        """A slave's copy of its master's table (metadata sync)."""
        self.table = {k: valid_offsets(k, v) for k, v in table.items()}
        self._indexed = None

    def merge(self, table: Mapping[str, dict[int, int]]) -> None:
        """Entries of a master's table over ours (a slave's sync, keeping its own keys)."""
        self.table.update(table)
