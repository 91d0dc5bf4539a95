"""`TopicConfigManager`: the broker's topic table, its system topics and topics.json."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace

from engine.broker.config import BrokerConfig
from engine.broker.persist import Persister
from engine.broker.pop.names import revive_topic
from engine.protocol import attributes as attrs
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.perm import PERM_INHERIT, PERM_READ, PERM_RW, PERM_WRITE, is_inherited
from engine.store.config_files import ConfigFiles
from engine.store.record_scan import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

TBW102 = "TBW102"  # AUTO_CREATE_TOPIC_KEY_TOPIC
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SCHEDULE_QUEUE_NUMS = 18
DLQ_NUMS_PER_GROUP = 1

SYSTEM_TOPICS = frozenset({TBW102, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC,
                           "RMQ_SYS_TRACE_TOPIC", TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                           SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
#: Topics `MessageStore.cleanUnusedTopic` never destroys, whether configured or not.
KEEP_QUEUES_OF = frozenset({SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC})
NOT_ALLOWED_SEND = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                              TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})

TOPIC_MAX_LENGTH = 127
_TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def create_dlq(topics: TopicConfigManager, group: str) -> TopicConfig:
    """The group's dead-letter topic, created on first use: one queue, readable and writable
    as Apache creates it since 4.9.2 (no consumer drains it because no one subscribes to it,
    and the dead-letter tools read it with plain pulls)."""
    return topics.create_if_absent(dlq_topic(group), DLQ_NUMS_PER_GROUP, PERM_RW)


def topic_name_problem(topic: str) -> str | None:
    """Why `topic` is not a valid topic name (`TopicValidator.validateTopic`), or None."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    if not _TOPIC_NAME.match(topic):
        return ("The specified topic[" + topic + "] contains illegal characters, allowing only "
                "^[%|a-zA-Z0-9_-]+$")
    return None


class TopicConfigManager:
    """Topic configs by name, with the data version the name servers compare."""

    def __init__(self, config: BrokerConfig, files: ConfigFiles,
                 on_change: Callable[[], None] | None = None,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.broker = config
        self.clock = clock
        self.on_change = on_change
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics = set(SYSTEM_TOPICS)
        self.files = files
        self._persister = Persister(self.wrapper, files.save_topics, "topics.json")
        self._add_builtin_topics()

    def _add_builtin_topics(self) -> None:
        b = self.broker
        builtin = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
        if b.auto_create_topic_enable:
            builtin.append(TopicConfig(TBW102, b.default_topic_queue_nums,
                                       b.default_topic_queue_nums, PERM_INHERIT | PERM_RW))
        builtin.append(TopicConfig(BENCHMARK_TOPIC, 1024, 1024))
        builtin.append(TopicConfig(b.broker_cluster_name, 16, 16, PERM_INHERIT | (
            PERM_RW if b.cluster_topic_enable else 0)))
        builtin.append(TopicConfig(b.broker_name, 1, 1, PERM_INHERIT | (
            PERM_RW if b.broker_topic_enable else 0)))
        builtin.append(TopicConfig(OFFSET_MOVED_EVENT, 1, 1))
        builtin.append(TopicConfig(SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, SCHEDULE_QUEUE_NUMS))
        if b.trace_topic_enable:
            builtin.append(TopicConfig(b.msg_trace_topic_name, 1, 1))
        builtin.append(TopicConfig(f"{b.broker_cluster_name}_REPLY_TOPIC", 1, 1))
        builtin.append(TopicConfig(revive_topic(b.broker_cluster_name), b.revive_queue_num,
                                   b.revive_queue_num))  # 5.x POP checkpoints and acks
        for config in builtin:
            self.table[config.topic_name] = config
            self.system_topics.add(config.topic_name)

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        """Merge topics.json (or its .bak) over the built-in topics.

        Raises:
            ConfigFileError: the file exists but cannot be decoded.
        """
        wrapper = self.files.load_topics()
        if wrapper is None:
            return
        self.table.update(wrapper.topic_config_table)
        self.data_version = wrapper.data_version

    def persist(self) -> None:
        self._persister.request()

    def flush(self) -> None:
        self._persister.flush()

    async def wait_persisted(self) -> None:
        await self._persister.wait()

    def mark_changed(self) -> None:
        """A new data version and a re-registration without a topic change (brokerPermission)."""
        self._changed()

    def _changed(self) -> None:
        self.data_version = self.data_version.next(self.clock())
        self.persist()
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ queries

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith("rmq_sys_")

    def wrapper(self, perm_cap: int | None = None) -> TopicConfigSerializeWrapper:
        """The table as sent to name servers; a non-writable broker caps every topic's perm."""
        table = dict(self.table)
        if perm_cap is not None:
            table = {name: replace(c, perm=c.perm & perm_cap) for name, c in table.items()}
        return TopicConfigSerializeWrapper(table, self.data_version)

    # ------------------------------------------------------------------ changes

    def attributes_after(self, topic: str, modification: dict[str, str]) -> dict[str, str]:
        """The attributes `topic` gets from an UPDATE_AND_CREATE_TOPIC carrying
        `modification` (signed keys): Apache's rules (`attrs.alter`), creating when the
        topic is new; then this broker's own limit: its consume queues are SimpleCQ and it
        keeps no compacted topics, so `queue.type=BatchCQ` and `cleanup.policy=COMPACTION`
        are refused rather than stored and ignored.

        Raises:
            AttributeProblem: Apache's refusal, or a value this broker cannot honour.
        """
        old = self.table.get(topic)
        result = attrs.alter(old.attribute_map if old else {}, modification,
                             create=old is None)
        for attribute in (attrs.QUEUE_TYPE, attrs.CLEANUP_POLICY):
            value = result.get(attribute.name, attribute.default)
            if value != attribute.default:
                raise attrs.AttributeProblem(
                    f"{attribute.name} {value} is not supported by this broker: its topics "
                    f"are {attribute.name}={attribute.default}")
        return result

    def put(self, config: TopicConfig) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        old = self.table.get(config.topic_name)
        self.table[config.topic_name] = config
        log.info("topic %s: %s", "changed" if old else "created", config)
        self._changed()
        return config

    def delete(self, topic: str) -> TopicConfig | None:
        old = self.table.pop(topic, None)
        if old is not None:
            log.info("topic deleted: %s", old)
            self._changed()
        return old

    def set_perm(self, topic: str, perm: int) -> TopicConfig | None:
        old = self.table.get(topic)
        if old is None:
            return None
        return self.put(replace(old, perm=perm))

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int,
                       sys_flag: int = 0) -> TopicConfig | None:
        """Auto-create `topic` from the template `default_topic` on a send (request-codes §3.8).

        Returns None when the template is missing or does not allow inheriting.
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning("create topic %s: template topic %s does not exist", topic,
                        default_topic)
            return None
        if default_topic == TBW102 and not self.broker.auto_create_topic_enable:
            template = replace(template, perm=PERM_RW)
        if not is_inherited(template.perm):
            log.warning("create topic %s: template topic %s has no inherit permission",
                        topic, default_topic)
            return None
        queues = max(1, min(queue_nums, template.write_queue_nums))
        config = TopicConfig(topic, queues, queues, template.perm & ~PERM_INHERIT,
                             template.topic_filter_type, sys_flag)
        return self.put(config)

    def create_if_absent(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE,
                         sys_flag: int = 0) -> TopicConfig:
        """Retry, DLQ and other broker-made topics (`createTopicInSendMessageBackMethod`)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        return self.put(TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=sys_flag))
