"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies: the queues an orderly consumer locks on a broker."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import ClientId, GroupName
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.wire import wire_name


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    consumer_group: GroupName = ""
    client_id: ClientId = ""
    mq_set: frozenset[MessageQueue] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    """The subset of the requested queues now locked by the requesting client."""

    lock_ok_mq_set: frozenset[MessageQueue] = wire_name("lockOKMQSet", default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class UnlockBatchRequestBody:
    consumer_group: GroupName = ""
    client_id: ClientId = ""
    mq_set: frozenset[MessageQueue] = field(default_factory=frozenset)
