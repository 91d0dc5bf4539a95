"""Admin client: typed calls to name servers and brokers over `engine.remoting`."""

from __future__ import annotations

from engine.client.admin import MQAdmin, TopicDeletion, merge_consume_stats
from engine.client.broker_admin import BrokerAdmin, DelayOffsets, QueryMessageResult
from engine.client.errors import (
    BadResponseError,
    ClientError,
    InvalidAddressError,
    NotFoundError,
    ServerError,
    UnreachableError,
)
from engine.client.namesrv import NamesrvAdmin, ServerOutcome

__all__ = [
    "BadResponseError",
    "BrokerAdmin",
    "ClientError",
    "DelayOffsets",
    "InvalidAddressError",
    "MQAdmin",
    "NamesrvAdmin",
    "NotFoundError",
    "QueryMessageResult",
    "ServerError",
    "ServerOutcome",
    "TopicDeletion",
    "UnreachableError",
    "merge_consume_stats",
]
