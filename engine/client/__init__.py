"""Client library: admin calls, producers (plain, transactional), push and lite pull consumers.

The code sits in sub-packages, each importing only those below it: `core` (instance, routes,
requests, codecs, errors, messages), `admin` and `trace` over it, `produce` over trace,
`consume` over produce (docs/client.md#layout).  The names applications use are re-exported
here, imported on first use (PEP 562), so a tool that needs only the admin calls does not pay
for loading the producer and consumer machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AllocateMessageQueueAveragely": "engine.client.consume.allocate",
    "AllocateMessageQueueAveragelyByCircle": "engine.client.consume.allocate",
    "AllocateStrategy": "engine.client.consume.allocate",
    "BadResponseError": "engine.client.core.errors",
    "BrokerAdmin": "engine.client.admin.broker",
    "BrokerNotFoundError": "engine.client.core.errors",
    "ClientConfig": "engine.client.core.client_config",
    "ClientError": "engine.client.core.errors",
    "ClientInstance": "engine.client.core.instance",
    "ClientStateError": "engine.client.core.errors",
    "ConsumeConcurrentlyContext": "engine.client.core.results",
    "ConsumeConcurrentlyStatus": "engine.client.core.results",
    "ConsumeFromWhere": "engine.protocol.body.heartbeat",
    "ConsumeOrderlyContext": "engine.client.core.results",
    "ConsumeOrderlyStatus": "engine.client.core.results",
    "ConsumerOptions": "engine.client.consume.consumer_options",
    "DelayOffsets": "engine.client.admin.broker",
    "ExpressionType": "engine.protocol.body.heartbeat",
    "InvalidAddressError": "engine.client.core.errors",
    "LitePullConsumer": "engine.client.consume.lite_pull_consumer",
    "LitePullOptions": "engine.client.consume.consumer_options",
    "LocalTransactionState": "engine.client.core.results",
    "MQAdmin": "engine.client.admin.cluster",
    "Message": "engine.client.core.message",
    "MessageExt": "engine.client.core.message",
    "MessageModel": "engine.protocol.body.heartbeat",
    "MessageQueue": "engine.protocol.body.message_queue",
    "MessageValidationError": "engine.client.core.errors",
    "NamesrvAdmin": "engine.client.core.namesrv",
    "NoRouteError": "engine.client.core.errors",
    "NotFoundError": "engine.client.core.errors",
    "Producer": "engine.client.produce.producer",
    "ProducerOptions": "engine.client.produce.producer",
    "PullResult": "engine.client.core.results",
    "PullStatus": "engine.client.core.results",
    "PushConsumer": "engine.client.consume.push_consumer",
    "QueryMessageResult": "engine.client.admin.broker",
    "SendFailedError": "engine.client.core.errors",
    "SendResult": "engine.client.core.results",
    "SendStatus": "engine.client.core.results",
    "ServerError": "engine.client.core.errors",
    "ServerOutcome": "engine.client.core.namesrv",
    "TopicDeletion": "engine.client.admin.cluster",
    "TransactionListener": "engine.client.produce.transaction",
    "TransactionProducer": "engine.client.produce.transaction",
    "TransactionSendResult": "engine.client.core.results",
    "UnreachableError": "engine.client.core.errors",
    "merge_consume_stats": "engine.client.admin.cluster",
    "select_by_hash": "engine.client.produce.producer",
    "select_by_random": "engine.client.produce.producer",
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
    from engine.client.admin.broker import BrokerAdmin, DelayOffsets, QueryMessageResult
    from engine.client.admin.cluster import MQAdmin, TopicDeletion, merge_consume_stats
    from engine.client.consume.allocate import (
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateStrategy,
    )
    from engine.client.consume.consumer_options import ConsumerOptions, LitePullOptions
    from engine.client.consume.lite_pull_consumer import LitePullConsumer
    from engine.client.consume.push_consumer import PushConsumer
    from engine.client.core.client_config import ClientConfig
    from engine.client.core.errors import (
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
    from engine.client.core.instance import ClientInstance
    from engine.client.core.message import Message, MessageExt
    from engine.client.core.namesrv import NamesrvAdmin, ServerOutcome
    from engine.client.core.results import (
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
    from engine.client.produce.producer import (
        Producer,
        ProducerOptions,
        select_by_hash,
        select_by_random,
    )
    from engine.client.produce.transaction import TransactionListener, TransactionProducer
    from engine.protocol.body.heartbeat import ConsumeFromWhere, ExpressionType, MessageModel
    from engine.protocol.body.message_queue import MessageQueue
