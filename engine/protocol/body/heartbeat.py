"""HEART_BEAT body: `HeartbeatData` with its producer, consumer and subscription entries.

How this works: the Java client writes enums by name and every field; the C++ client
(rocketmq-client-cpp 1.x/2.x, jsoncpp) writes enums as numbers (their Java ordinals:
`"consumeType":1,"messageModel":1,"consumeFromWhere":0`), `subVersion` as a string, and leaves
out `producerDataSet`, `unitMode`, `classFilterMode`, `expressionType`, and `tagsSet`/`codeSet`
when they are empty.  `wire.from_json` already reads enums by name or ordinal and numbers from
strings; every field here that a client may leave out has the default Java would give it.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from engine.protocol.body.message_queue import Topic
from engine.protocol.wire import wire_name

ClientId = str  # "ip@pid#nanotime" (Java) or "pid-ip@instance" (C++)
GroupName = str
TagCode = int  # Java String.hashCode() of a tag, a signed int32
SubVersion = int  # ms timestamp of the subscription

SUB_ALL = "*"
#: HEART_BEAT extFields a proxy adds for a client it registers (this engine's, not Apache's:
#: the broker's connection lists then show the client's protocol and address, not the
#: proxy's connection).
PROXY_PROTOCOL = "proxyProtocol"
PROXY_CLIENT_ADDR = "proxyClientAddr"
GRPC_PROTOCOL = "gRPC"


class ConsumeType(enum.Enum):
    """Member values are the Java ordinals, which the C++ client sends."""

    CONSUME_ACTIVELY = 0  # pull consumer
    CONSUME_PASSIVELY = 1  # push consumer
    CONSUME_POP = 2  # 5.x: the broker hands out messages (POP_MESSAGE)

    @property
    def type_cn(self) -> str:
        return _TYPE_CN[self]


_TYPE_CN = {ConsumeType.CONSUME_ACTIVELY: "PULL", ConsumeType.CONSUME_PASSIVELY: "PUSH",
            ConsumeType.CONSUME_POP: "POP"}


class MessageModel(enum.Enum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1  # deprecated
    CONSUME_FROM_MIN_OFFSET = 2  # deprecated
    CONSUME_FROM_MAX_OFFSET = 3  # deprecated
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class ExpressionType(enum.Enum):
    """Java keeps these as String constants; TAG is what an absent value means."""

    TAG = "TAG"
    SQL92 = "SQL92"


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: Topic
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[TagCode] = field(default_factory=frozenset)
    sub_version: SubVersion = 0
    expression_type: ExpressionType = ExpressionType.TAG
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: Topic, sub_string: str | None,
              expression_type: ExpressionType = ExpressionType.TAG,
              sub_version: SubVersion | None = None) -> SubscriptionData:
        """`FilterAPI.buildSubscriptionData`: split a TAG expression into tags and their codes.

        `None`, `""` and `"*"` subscribe to everything; SQL92 expressions are kept whole.
        `sub_version` defaults to now in ms, as Java's constructor does.
        """
        version = int(time.time() * 1000) if sub_version is None else sub_version
        if expression_type is not ExpressionType.TAG:
            return cls(topic, sub_string or "", sub_version=version,
                       expression_type=expression_type)
        if not sub_string or sub_string == SUB_ALL:
            return cls(topic, SUB_ALL, sub_version=version)
        tags = [t.strip() for t in sub_string.split("||") if t.strip()]
        return cls(topic, sub_string, frozenset(tags),
                   frozenset(java_string_hash(t) for t in tags), version)

    def with_codes(self) -> SubscriptionData:
        """Fill `codeSet` from `tagsSet` when a client sent tags without their codes."""
        if self.code_set or not self.tags_set:
            return self
        codes = frozenset(java_string_hash(t) for t in self.tags_set)
        return SubscriptionData(self.topic, self.sub_string, self.tags_set, codes,
                                self.sub_version, self.expression_type, self.class_filter_mode)

    @property
    def is_sub_all(self) -> bool:
        return self.sub_string == SUB_ALL or not self.sub_string


@dataclass(frozen=True, slots=True)
class ProducerData:
    group_name: GroupName


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: GroupName
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: frozenset[SubscriptionData] = field(default_factory=frozenset)
    unit_mode: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    client_id: ClientId = wire_name("clientID", "")
    producer_data_set: frozenset[ProducerData] = field(default_factory=frozenset)
    consumer_data_set: frozenset[ConsumerData] = field(default_factory=frozenset)
