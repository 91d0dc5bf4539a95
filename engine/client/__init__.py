"""Client library: admin calls, producers (plain, transactional), push and lite pull consumers."""

from __future__ import annotations

from engine.client.admin import MQAdmin, TopicDeletion, merge_consume_stats
from engine.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateStrategy,
)
from engine.client.broker_admin import BrokerAdmin, DelayOffsets, QueryMessageResult
from engine.client.client_config import ClientConfig
from engine.client.consumer_options import ConsumerOptions, LitePullOptions
from engine.client.errors import (
    BadResponseError,
    BrokerNotFoundError,
    ClientError,
    ClientStateError,
    InvalidAddressError,
    MessageValidationError,
    NoRouteError,
    NotFoundError,
    SendFailedError,
    ServerError,
    UnreachableError,
)
from engine.client.instance import ClientInstance
from engine.client.lite_pull_consumer import LitePullConsumer
from engine.client.message import Message, MessageExt
from engine.client.namesrv import NamesrvAdmin, ServerOutcome
from engine.client.producer import Producer, ProducerOptions, select_by_hash, select_by_random
from engine.client.push_consumer import PushConsumer
from engine.client.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from engine.client.transaction import TransactionListener, TransactionProducer
from engine.protocol.body.heartbeat import ConsumeFromWhere, ExpressionType, MessageModel
from engine.protocol.body.message_queue import MessageQueue

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateStrategy",
    "BadResponseError",
    "BrokerAdmin",
    "BrokerNotFoundError",
    "ClientConfig",
    "ClientError",
    "ClientInstance",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerOptions",
    "DelayOffsets",
    "ExpressionType",
    "InvalidAddressError",
    "LitePullConsumer",
    "LitePullOptions",
    "LocalTransactionState",
    "MQAdmin",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageValidationError",
    "NamesrvAdmin",
    "NoRouteError",
    "NotFoundError",
    "Producer",
    "ProducerOptions",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "QueryMessageResult",
    "SendFailedError",
    "SendResult",
    "SendStatus",
    "ServerError",
    "ServerOutcome",
    "TopicDeletion",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "UnreachableError",
    "merge_consume_stats",
    "select_by_hash",
    "select_by_random",
]
