"""Bodies of the broker's admin answers: consume/topic stats, connections, offsets, runtime info.

Maps keyed by `MessageQueue` are written by fastjson with the queue object as an unquoted key
(`{{"brokerName":"b","queueId":0,"topic":"T"}:5}`); `wire.to_json` does the same and
`wire.from_json` reads that form and the standard one (the key object's JSON, quoted).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import (
    ClientId,
    ConsumeFromWhere,
    ConsumeType,
    GroupName,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.body.message_queue import MessageQueue, QueueId, Topic
from engine.protocol.body.route import BrokerAddr
from engine.protocol.codes import LanguageCode
from engine.protocol.wire import wire_name

Offset = int
TimestampMs = int
ClientAddr = str  # "ip:port" of the client's channel

# ---------------------------------------------------------------------------- stats


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    broker_offset: Offset = 0
    consumer_offset: Offset = 0
    last_timestamp: TimestampMs = 0
    #: 5.x: how far the group has read (POP: popped); above `consumer_offset` by what is in
    #: flight.  4.9 brokers leave it out (None, and so does this one for pull groups).
    pull_offset: Offset | None = None


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS: per-queue broker and consumer offsets of one group."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: `[{group: [ConsumeStats per topic]}]` of one broker."""

    consume_stats_list: list[dict[GroupName, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: BrokerAddr | None = None
    total_diff: int = 0


@dataclass(frozen=True, slots=True)
class TopicOffset:
    min_offset: Offset = 0
    max_offset: Offset = 0
    last_update_timestamp: TimestampMs = 0


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO: min/max offset and last store time of every queue."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA: one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)


# ---------------------------------------------------------------------------- connections


@dataclass(frozen=True, slots=True)
class Connection:
    client_id: ClientId
    client_addr: ClientAddr
    language: LanguageCode
    version: int
    #: How the client reaches the cluster when not over remoting: "gRPC" for a 5.x client
    #: registered by this engine's proxy (left out otherwise, as 4.9 and 5.3 write it).
    protocol: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: the group's channels and its registered subscriptions."""

    connection_set: frozenset[Connection] = field(default_factory=frozenset)
    subscription_table: dict[Topic, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def compute_min_version(self) -> int:
        return min((c.version for c in self.connection_set), default=2**31 - 1)


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    connection_set: frozenset[Connection] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    client_id: ClientId
    remote_ip: str = wire_name("remoteIP")
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: TimestampMs = 0


@dataclass(frozen=True, slots=True)
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO: `{"data":{group:[ProducerInfo]}}`."""

    data: dict[GroupName, list[ProducerInfo]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO: the groups holding offsets of a topic."""

    group_list: frozenset[GroupName] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[ClientId] = field(default_factory=list)


# ---------------------------------------------------------------------------- offsets


@dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """INVOKE_BROKER_TO_RESET_OFFSET answer and RESET_CONSUMER_CLIENT_OFFSET request body."""

    offset_table: dict[MessageQueue, Offset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody:
    message_queue_table: dict[MessageQueue, Offset] = field(default_factory=dict)
    consumer_table: dict[ClientId, dict[MessageQueue, Offset]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueTimeSpan:
    """The `*Str` fields are Java getters formatting the times in the broker's time zone;
    they are read when present and never needed."""

    message_queue: MessageQueue | None = None
    min_time_stamp: TimestampMs = 0
    max_time_stamp: TimestampMs = 0
    consume_time_stamp: TimestampMs = 0
    delay_time: int = 0
    min_time_stamp_str: str | None = None
    max_time_stamp_str: str | None = None
    consume_time_stamp_str: str | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanBody:
    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class QueryCorrectionOffsetBody:
    """QUERY_CORRECTION_OFFSET: `{"correctionOffsets":{queueId:offset}}`."""

    correction_offsets: dict[QueueId, Offset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    physic_offset: Offset = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody:
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] = field(default_factory=list)
    max_queue_index: int = 0
    min_queue_index: int = 0


# ---------------------------------------------------------------------------- client runtime


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    commit_offset: Offset = 0
    cached_msg_min_offset: Offset = 0
    cached_msg_max_offset: Offset = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = wire_name("cachedMsgSizeInMiB", 0)
    transaction_msg_min_offset: Offset = 0
    transaction_msg_max_offset: Offset = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: TimestampMs = 0
    droped: bool = False  # sic, Java's spelling
    last_pull_timestamp: TimestampMs = 0
    last_consume_timestamp: TimestampMs = 0


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    pull_rt: float = wire_name("pullRT", 0.0)
    pull_tps: float = wire_name("pullTPS", 0.0)
    consume_rt: float = wire_name("consumeRT", 0.0)
    consume_ok_tps: float = wire_name("consumeOKTPS", 0.0)
    consume_failed_tps: float = wire_name("consumeFailedTPS", 0.0)
    consume_failed_msgs: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO: what a client reports about one of its consumers."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[Topic, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None


class CMResult(enum.Enum):
    CR_SUCCESS = 0
    CR_LATER = 1
    CR_ROLLBACK = 2
    CR_COMMIT = 3
    CR_THROW_EXCEPTION = 4
    CR_RETURN_NULL = 5


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: CMResult | None = None
    remark: str | None = None
    spent_time_mills: int = 0  # sic
