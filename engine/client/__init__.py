"""Client library: admin calls, producers (plain, transactional), push and lite pull consumers.

Names are imported on first use (PEP 562), so a tool that needs only the admin calls does not
pay for loading the producer and consumer machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AllocateMessageQueueAveragely": "engine.client.allocate",
    "AllocateMessageQueueAveragelyByCircle": "engine.client.allocate",
    "AllocateStrategy": "engine.client.allocate",
    "BadResponseError": "engine.client.errors",
    "BrokerAdmin": "engine.client.broker_admin",
    "BrokerNotFoundError": "engine.client.errors",
    "ClientConfig": "engine.client.client_config",
    "ClientError": "engine.client.errors",
    "ClientInstance": "engine.client.instance",
    "ClientStateError": "engine.client.errors",
    "ConsumeConcurrentlyContext": "engine.client.results",
    "ConsumeConcurrentlyStatus": "engine.client.results",
    "ConsumeFromWhere": "engine.protocol.body.heartbeat",
    "ConsumeOrderlyContext": "engine.client.results",
    "ConsumeOrderlyStatus": "engine.client.results",
    "ConsumerOptions": "engine.client.consumer_options",
    "DelayOffsets": "engine.client.broker_admin",
    "ExpressionType": "engine.protocol.body.heartbeat",
    "InvalidAddressError": "engine.client.errors",
    "LitePullConsumer": "engine.client.lite_pull_consumer",
    "LitePullOptions": "engine.client.consumer_options",
    "LocalTransactionState": "engine.client.results",
    "MQAdmin": "engine.client.admin",
    "Message": "engine.client.message",
    "MessageExt": "engine.client.message",
    "MessageModel": "engine.protocol.body.heartbeat",
    "MessageQueue": "engine.protocol.body.message_queue",
    "MessageValidationError": "engine.client.errors",
    "NamesrvAdmin": "engine.client.namesrv",
    "NoRouteError": "engine.client.errors",
    "NotFoundError": "engine.client.errors",
    "Producer": "engine.client.producer",
    "ProducerOptions": "engine.client.producer",
    "PullResult": "engine.client.results",
    "PullStatus": "engine.client.results",
    "PushConsumer": "engine.client.push_consumer",
    "QueryMessageResult": "engine.client.broker_admin",
    "SendFailedError": "engine.client.errors",
    "SendResult": "engine.client.results",
    "SendStatus": "engine.client.results",
    "ServerError": "engine.client.errors",
    "ServerOutcome": "engine.client.namesrv",
    "TopicDeletion": "engine.client.admin",
    "TransactionListener": "engine.client.transaction",
    "TransactionProducer": "engine.client.transaction",
    "TransactionSendResult": "engine.client.results",
    "UnreachableError": "engine.client.errors",
    "merge_consume_stats": "engine.client.admin",
    "select_by_hash": "engine.client.producer",
    "select_by_random": "engine.client.producer",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # the same names, eagerly, for type checkers
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
