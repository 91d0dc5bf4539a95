"""5.x messages <-> remoting messages, and their checks (sans-IO, 5.3 `SendMessageActivity`).

How this works: a `pb.Message` to send becomes the properties, body and sysflag of a
SEND_MESSAGE_V2, checked as 5.3's proxy checks it (body size, user properties, tag, keys,
message group, delivery time, transaction recovery time), with the producer group set to the
topic's name (5.3 uses the topic as the producer group of gRPC producers, so the transaction
checks of a topic reach the clients publishing to it).  `message_type` reads back which of
NORMAL / FIFO / DELAY / TRANSACTION a message is (`engine.protocol.attributes`, the rule the
broker's attributes share); `check_message_type` is 5.3's `DefaultTopicMessageTypeValidator`.
`to_proto` turns a stored record into the `pb.Message` a client receives (receive, checks).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from engine.client.compression import inflate
from engine.client.message import RESERVED_PROPERTIES
from engine.protocol.attributes import TopicMessageType, message_type_of_message
from engine.protocol.message import (
    COMPRESSED_FLAG,
    KEY_SEPARATOR,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    MessageRecord,
)
from engine.proxy.config import ProxyConfig
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.validate import has_control, is_blank, split_namespace, validate_tag

PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"

#: 5.3 `MessageConst.STRING_HASH_SET`: 4.9's names plus the 5.x ones.
SYSTEM_PROPERTIES = RESERVED_PROPERTIES | frozenset({
    PROPERTY_SHARDING_KEY, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS, "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", PROPERTY_BORN_HOST,
    PROPERTY_BORN_TIMESTAMP, PROPERTY_TRACE_CONTEXT, "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "SHARDING_KEY",
    "__STARTDELIVERTIME", "CRC32", "TRACE_CONTEXT",
})

#: `Timestamps.isValid`'s range of seconds (0001-01-01 to 9999-12-31).
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799

#: 5.3.3 `MessageConst.STRING_HASH_SET`, exactly: the user property names a send refuses.
RESERVED_PROPERTY_KEYS = frozenset({
    "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER",
    "CONSUME_START_TIME", "CORRECTION_FLAG", "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID",
    "DLQ_ORIGIN_TOPIC", "DUP_INFO", "EXTEND_UNIQ_INFO", "INNER_MULTI_QUEUE_OFFSET",
    "INSTANCE_ID", "KEYS", "MAX_OFFSET", "MAX_RECONSUME_TIMES", "MIN_OFFSET", "MQ2_FLAG",
    "MSG_REGION", "MSG_TYPE", "ORIGIN_MESSAGE_ID", "PGROUP", "POP_CK", "POP_CK_OFFSET",
    "PUSH_REPLY_TIME", "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME", "REPLY_TO_CLIENT",
    "RETRY_TOPIC", "TAGS", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS", "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS",
    "TIMER_OUT_MS", "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG", "TRAN_MSG",
    "TRAN_PREPARED_QUEUE_OFFSET", "TTL", "UNIQ_KEY", "WAIT", "__BORNHOST", "__CRC32#",
})



@dataclass(frozen=True, slots=True)
class OutMessage:
    """One message ready for SEND_MESSAGE_V2."""

    topic: str
    body: bytes
    sys_flag: int
    properties: dict[str, str]
    message_id: str
    message_group: str


def _check_key(key: str) -> None:
    if not key:
        return
    if is_blank(key):
        raise ProxyError(pb.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if has_control(key):
        raise ProxyError(pb.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _check_group(group: str, max_size: int) -> None:
    if is_blank(group):
        raise ProxyError(pb.ILLEGAL_MESSAGE_GROUP,
                         "message group cannot be the char sequence of whitespace")
    if max_size <= 0:
        return  # 5.3.3 skips the control-character check too then
    if len(group.encode("utf-8")) >= max_size:
        raise ProxyError(pb.ILLEGAL_MESSAGE_GROUP,
                         f"message group exceed the max size {max_size}")
    if has_control(group):
        raise ProxyError(pb.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def _user_properties(msg: pb.Message, config: ProxyConfig) -> tuple[dict[str, str], int]:
    props = dict(msg.user_properties)
    if len(props) > config.user_property_max_num:
        raise ProxyError(pb.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"too many user properties, max is {config.user_property_max_num}")
    size = 0
    for key, value in props.items():
        if key in RESERVED_PROPERTY_KEYS:
            raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control(key):
            raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the key of property cannot contain control character")
        if has_control(value):
            raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the value of property cannot contain control character")
        size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    return props, size


def delay_level(deliver_ms: int, now_ms: int, levels_ms: list[int]) -> int:
    """5.3 `ProxyConfig.computeDelayLevel`: the smallest level at least the delay (or the last)."""
    delay = deliver_ms - now_ms
    for level, level_ms in enumerate(levels_ms, start=1):
        if level_ms >= delay:
            return level
    return len(levels_ms)


def to_remoting(msg: pb.Message, *, born_host: str, config: ProxyConfig,
                now_ms: int) -> OutMessage:
    """Check one message to send and build its remoting form.

    Raises:
        ProxyError: the check 5.3 makes that the message fails, with its code.
    """
    topic = msg.topic.name
    body = msg.body
    if config.enable_message_body_empty_check and not body:
        raise ProxyError(pb.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if 0 < config.max_message_size < len(body):
        raise ProxyError(pb.MESSAGE_BODY_TOO_LARGE,
                         f"message body cannot exceed the max {config.max_message_size}")
    sysp = msg.system_properties
    props, size = _user_properties(msg, config)
    tag = sysp.tag
    validate_tag(tag)
    if tag:
        props[PROPERTY_TAGS] = tag
    size += len(tag.encode("utf-8"))
    keys = list(sysp.keys)
    for key in keys:
        _check_key(key)
        size += len(key.encode("utf-8"))
    if keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    if size > config.max_user_property_size:
        raise ProxyError(pb.MESSAGE_PROPERTIES_TOO_LARGE, "the total size of user property is "
                         f"too large, max is {config.max_user_property_size}")
    message_id = sysp.message_id
    if is_blank(message_id):
        raise ProxyError(pb.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
    sys_flag = COMPRESSED_FLAG if sysp.body_encoding == pb.GZIP else 0
    if sysp.message_type == pb.TRANSACTION:
        sys_flag |= TRANSACTION_PREPARED_TYPE
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        if sysp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sysp.orphaned_transaction_recovery_duration.seconds
            limit = config.max_transaction_recovery_second
            if 0 < limit < seconds:
                raise ProxyError(pb.BAD_REQUEST, "the max transaction recovery time of message "
                                                 f"is too large, max is {limit}")
            props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sysp.HasField("delivery_timestamp"):
        try:
            deliver_ms = sysp.delivery_timestamp.ToMilliseconds()
        except ValueError as exc:
            raise ProxyError(pb.ILLEGAL_DELIVERY_TIME, f"delivery timestamp: {exc}") from None
        if 0 < config.max_delay_time_mills < deliver_ms - now_ms:
            raise ProxyError(pb.ILLEGAL_DELIVERY_TIME, "the max delay time of message is too "
                             f"large, max is {config.max_delay_time_mills}")
        if config.use_delay_level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(
                delay_level(deliver_ms, now_ms, config.delay_levels_ms()))
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    props[PROPERTY_RECONSUME_TIME] = str(sysp.delivery_attempt)
    props[PROPERTY_PRODUCER_GROUP] = topic
    group = sysp.message_group
    if group:
        _check_group(group, config.max_message_group_size)
        props[PROPERTY_SHARDING_KEY] = group
    if sysp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sysp.trace_context
    host = born_host if is_blank(sysp.born_host) else sysp.born_host
    if not is_blank(host):
        props[PROPERTY_BORN_HOST] = host
    born = sysp.born_timestamp  # unset: 0 s, valid (5.3.3 then stores "0")
    if _MIN_SECONDS <= born.seconds <= _MAX_SECONDS and 0 <= born.nanos < 1_000_000_000:
        props[PROPERTY_BORN_TIMESTAMP] = str(born.ToMilliseconds())  # `Timestamps.isValid`
    return OutMessage(topic, body, sys_flag, props, message_id, group)


def message_type(props: dict[str, str]) -> TopicMessageType:
    """5.3 `TopicMessageType.parseFromMessageProperty` (`engine.protocol.attributes`)."""
    return message_type_of_message(props)


def check_message_type(expected: TopicMessageType, actual: TopicMessageType) -> None:
    """5.3 `DefaultTopicMessageTypeValidator`: a MIXED topic takes any type.

    Raises:
        ProxyError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
    """
    if actual is TopicMessageType.UNSPECIFIED or (
            actual is not expected and expected is not TopicMessageType.MIXED):
        raise ProxyError(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         "TopicMessageType validate failed, the expected type is "
                         f"{expected.value}, but actual type is {actual.value}")


# ---------------------------------------------------------------------- stored -> 5.x

def body_md5(body: bytes) -> str:
    """The body digest 5.3's `GrpcConverter` sends: MD5, upper-case hex.  Every 5.x client checks
    MD5 the same way; their CRC32 checks differ (Node compares the decimal value, Java and
    Python hex), and the Node client drops a push consumer's message whose check fails."""
    return hashlib.md5(body, usedforsecurity=False).hexdigest().upper()


_PROTO_TYPES = {TopicMessageType.NORMAL: pb.NORMAL, TopicMessageType.FIFO: pb.FIFO,
                TopicMessageType.DELAY: pb.DELAY, TopicMessageType.TRANSACTION: pb.TRANSACTION}


def _proto_type(props: dict[str, str]) -> int:
    return _PROTO_TYPES.get(message_type(props), pb.NORMAL)


def to_proto(record: MessageRecord, *, topic: str | None = None,
             props: dict[str, str] | None = None, receipt_handle: str = "",
             delivery_attempt: int | None = None, offset_msg_id: str = "",
             now_ms: int | None = None) -> pb.Message:
    """A stored record as the `pb.Message` a 5.x client receives (5.3 `GrpcConverter`)."""
    if props is None:
        props = record.properties()
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    body = inflate(record.body, record.sysflag)
    namespace, name = split_namespace(topic or record.topic)
    msg = pb.Message(topic=pb.Resource(name=name, resource_namespace=namespace), body=body)
    for key, value in props.items():
        if key not in SYSTEM_PROPERTIES:
            msg.user_properties[key] = value
    sysp = msg.system_properties
    tag = props.get(PROPERTY_TAGS)
    if tag:
        sysp.tag = tag
    keys = props.get(PROPERTY_KEYS)
    if keys:
        sysp.keys.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    sysp.message_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or offset_msg_id
    sysp.body_digest.type = pb.MD5
    sysp.body_digest.checksum = body_md5(body)
    sysp.body_encoding = pb.IDENTITY
    sysp.message_type = _proto_type(props)  # type: ignore[assignment]
    sysp.born_timestamp.FromMilliseconds(record.born_timestamp)
    sysp.born_host = props.get(PROPERTY_BORN_HOST) or record.born_host[0]
    sysp.store_timestamp.FromMilliseconds(record.store_timestamp)
    sysp.store_host = f"{record.store_host[0]}:{record.store_host[1]}"
    delay_s = props.get(PROPERTY_TIMER_DELAY_SEC)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    if delay_s and delay_s.isdigit():  # 5.3: relative delays are reported from now
        sysp.delivery_timestamp.FromMilliseconds(now_ms + int(delay_s) * 1000)
    elif deliver and deliver.lstrip("-").isdigit():
        sysp.delivery_timestamp.FromMilliseconds(int(deliver))
    if receipt_handle:
        sysp.receipt_handle = receipt_handle
    sysp.queue_id = record.queue_id
    sysp.queue_offset = record.queue_offset
    sysp.delivery_attempt = (delivery_attempt if delivery_attempt is not None
                             else record.reconsume_times + 1)
    group = props.get(PROPERTY_SHARDING_KEY)
    if group:
        sysp.message_group = group
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace:
        sysp.trace_context = trace
    return msg
