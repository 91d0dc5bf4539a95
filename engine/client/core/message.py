"""Messages as the client API sees them: `Message` to send and `MessageExt` received.

How this works: a `Message` keeps the fields users set (tags, keys, delay level, flag, user
properties) apart from the properties the client itself adds (`system_properties`: retry and
transaction bookkeeping), and `Message.properties_map()` merges them into the wire properties
the way Java's `Message` holds them.  User property names that RocketMQ reserves are refused,
as Java's `putUserProperty` does.  A `MessageExt` is built from a pulled record: its body is
already inflated, its properties parsed, and `topic` is the original topic for messages
redelivered through ``%RETRY%<group>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.client.core.errors import MessageValidationError
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import (
    KEY_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Address,
    create_offset_msg_id,
)

PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"

#: `MessageConst.STRING_HASH_SET` (4.9.7): names `putUserProperty` refuses.
RESERVED_PROPERTIES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET",
    # 5.x timer messages: set them with Message(deliver_time_ms=/delay_time_sec=/delay_time_ms=)
    "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS",
})


def _keys(keys: str | Sequence[str] | None) -> tuple[str, ...]:
    if keys is None:
        return ()
    if isinstance(keys, str):
        return tuple(k for k in keys.split(KEY_SEPARATOR) if k)
    return tuple(keys)


@dataclass(frozen=True, slots=True, init=False)
class Message:
    """A message to send.  `keys` may be one string ("k1 k2") or a sequence of keys.

    A timer message (RocketMQ 5, delivered at any time up to the broker's timerMaxDelaySec)
    sets one of `deliver_time_ms` (epoch ms), `delay_time_sec` or `delay_time_ms`, as Java
    5.x's `setDeliverTimeMs` / `setDelayTimeSec` / `setDelayTimeMs` do (docs/client.md).
    """

    topic: str
    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    flag: int
    properties: Mapping[str, str]
    delay_time_level: int
    wait_store_msg_ok: bool
    system_properties: Mapping[str, str]
    deliver_time_ms: int
    delay_time_sec: int
    delay_time_ms: int

    def __init__(self, topic: str, body: bytes, *, tags: str | None = None,
                 keys: str | Sequence[str] | None = None, flag: int = 0,
                 properties: Mapping[str, str] | None = None, delay_time_level: int = 0,
                 wait_store_msg_ok: bool = True,
                 system_properties: Mapping[str, str] | None = None,
                 deliver_time_ms: int = 0, delay_time_sec: int = 0,
                 delay_time_ms: int = 0) -> None:
        props = dict(properties or {})
        reserved = sorted(RESERVED_PROPERTIES.intersection(props))
        if reserved:
            raise MessageValidationError(
                f"The Property<{reserved[0]}> is used by system; choose another name")
        setattr_ = object.__setattr__
        setattr_(self, "topic", topic)
        setattr_(self, "body", bytes(body))
        setattr_(self, "tags", tags)
        setattr_(self, "keys", _keys(keys))
        setattr_(self, "flag", flag)
        setattr_(self, "properties", props)
        setattr_(self, "delay_time_level", delay_time_level)
        setattr_(self, "wait_store_msg_ok", wait_store_msg_ok)
        setattr_(self, "system_properties", dict(system_properties or {}))
        setattr_(self, "deliver_time_ms", deliver_time_ms)
        setattr_(self, "delay_time_sec", delay_time_sec)
        setattr_(self, "delay_time_ms", delay_time_ms)

    def properties_map(self) -> dict[str, str]:
        """Every property as it goes on the wire (system ones last, so they win)."""
        props = dict(self.properties)
        if self.keys:
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(self.keys)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.delay_time_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_time_level)
        if self.deliver_time_ms > 0:
            props[PROPERTY_TIMER_DELIVER_MS] = str(self.deliver_time_ms)
        if self.delay_time_sec > 0:
            props[PROPERTY_TIMER_DELAY_SEC] = str(self.delay_time_sec)
        if self.delay_time_ms > 0:
            props[PROPERTY_TIMER_DELAY_MS] = str(self.delay_time_ms)
        props[PROPERTY_WAIT_STORE_MSG_OK] = "true" if self.wait_store_msg_ok else "false"
        props.update(self.system_properties)
        return props

    @property
    def is_transactional(self) -> bool:
        return self.system_properties.get(PROPERTY_TRANSACTION_PREPARED) == "true"

    @property
    def transaction_id(self) -> str | None:
        """The `UNIQ_KEY` of a transaction's half message (set before it is sent)."""
        if not self.is_transactional:
            return None
        return self.system_properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def with_system_properties(self, **extra: str) -> Message:
        """A copy with more client-set properties (e.g. `UNIQ_KEY`, `TRAN_MSG`)."""
        return Message(self.topic, self.body, tags=self.tags, keys=self.keys, flag=self.flag,
                       properties=self.properties, delay_time_level=self.delay_time_level,
                       wait_store_msg_ok=self.wait_store_msg_ok,
                       system_properties={**self.system_properties, **extra},
                       deliver_time_ms=self.deliver_time_ms, delay_time_sec=self.delay_time_sec,
                       delay_time_ms=self.delay_time_ms)

    def without_delay(self) -> Message:
        return Message(self.topic, self.body, tags=self.tags, keys=self.keys, flag=self.flag,
                       properties=self.properties, wait_store_msg_ok=self.wait_store_msg_ok,
                       system_properties=self.system_properties,
                       deliver_time_ms=self.deliver_time_ms, delay_time_sec=self.delay_time_sec,
                       delay_time_ms=self.delay_time_ms)


@dataclass(frozen=True, slots=True)
class MessageExt:
    """A received message (Java's `MessageExt`/`MessageClientExt`)."""

    topic: str
    body: bytes
    properties: dict[str, str]
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sysflag: int
    flag: int
    born_timestamp: int
    born_host: Address
    store_timestamp: int
    store_host: Address
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int = 0
    store_size: int = 0
    queue_topic: str = field(default="")  # the topic pulled from (%RETRY%... for retries)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        return _keys(self.properties.get(PROPERTY_KEYS))

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """`UNIQ_KEY`, else the offset message id."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def transaction_id(self) -> str | None:
        if self.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return None

    @property
    def delay_time_level(self) -> int:
        text = self.properties.get(PROPERTY_DELAY_TIME_LEVEL, "")
        return int(text) if text.isdigit() else 0

    @property
    def message_queue(self) -> MessageQueue:
        """The queue the message was pulled from."""
        return MessageQueue(self.queue_topic or self.topic, self.broker_name, self.queue_id)

    def user_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k not in RESERVED_PROPERTIES}
