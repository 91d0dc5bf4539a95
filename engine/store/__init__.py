"""The message store: RocketMQ's on-disk layout (commit log, consume queues, index, checkpoint)."""

from __future__ import annotations

from engine.store.config import FlushDiskType, MessageStoreConfig
from engine.store.message_store import MessageStore
from engine.store.results import (
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

__all__ = [
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "MessageStoreConfig",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
]
