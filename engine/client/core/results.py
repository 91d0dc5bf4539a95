"""Result values and listener verdicts: sends, pulls, transactions, consumption.

How this works: results are frozen values; the two consume contexts are the only mutable
objects here, because a listener answers through them (`ack_index`,
`delay_level_when_next_consume`, `suspend_current_queue_time_millis`) as in Java.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from engine.client.core.message import MessageExt
from engine.protocol.body.message_queue import MessageQueue


class SendStatus(enum.Enum):
    """Response code -> status: 0 SEND_OK, 10 FLUSH_DISK_TIMEOUT, 12 FLUSH_SLAVE_TIMEOUT,
    11 SLAVE_NOT_AVAILABLE (all four mean "stored on the master")."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 12
    SLAVE_NOT_AVAILABLE = 11


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str  # UNIQ_KEY (comma-joined for a batch)
    offset_msg_id: str  # broker-made: store host + commit-log offset (comma-joined for a batch)
    message_queue: MessageQueue
    queue_offset: int  # of the first message
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = 8  # values are END_TRANSACTION's commitOrRollback
    ROLLBACK_MESSAGE = 12
    UNKNOW = 0  # sic, Java's spelling


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    send_result: SendResult
    local_transaction_state: LocalTransactionState
    transaction_id: str | None


class PullStatus(enum.Enum):
    FOUND = 0  # SUCCESS
    NO_NEW_MSG = 19  # PULL_NOT_FOUND
    NO_MATCHED_MSG = 20  # PULL_RETRY_IMMEDIATELY
    OFFSET_ILLEGAL = 21  # PULL_OFFSET_MOVED


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = 0
    SUSPEND_CURRENT_QUEUE_A_MOMENT = 1
    COMMIT = 2  # deprecated in Java; treated like SUCCESS with autoCommit
    ROLLBACK = 3  # deprecated in Java; treated like SUCCESS with autoCommit


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Listener's answer channel: messages after `ack_index` count as failed on success."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0  # 0: the broker uses 3 + reconsumeTimes
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    suspend_current_queue_time_millis: int = -1  # -1: the consumer's setting
