"""Subscriptions and where a consumer starts on a queue it has no offset for.

How this works (client-behaviour.md §7): the stored offset wins; only when the broker (or
the local file) has none (-1) does `consume_from_where` decide - last offset = the queue's
max offset (0 for ``%RETRY%`` topics), first offset = 0, timestamp = the offset the broker
finds for `consume_timestamp` (the max offset for ``%RETRY%`` topics).  A failed read (-2)
or a failed offset lookup skips the queue for this rebalance round (`OffsetUnknownError`).
"""

from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING

from engine.client.consume.offset_store import NO_OFFSET, OffsetStore, ReadOffsetType
from engine.client.core.errors import ClientError
from engine.protocol.body.heartbeat import ConsumeFromWhere, ExpressionType, SubscriptionData
from engine.protocol.body.message_queue import MessageQueue

if TYPE_CHECKING:
    from engine.client.core.instance import ClientInstance

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"  # Java's yyyyMMddHHmmss


class OffsetUnknownError(ClientError):
    """Where to start on a queue could not be decided this round."""


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def subscription(topic: str, expression: str | None,
                 expression_type: ExpressionType = ExpressionType.TAG) -> SubscriptionData:
    """`FilterAPI.build`: TAG expressions split on ``||``; SQL92 kept whole."""
    return SubscriptionData.build(topic, expression, expression_type)


def default_consume_timestamp() -> str:
    """Half an hour ago, as ``yyyyMMddHHmmss`` local time."""
    return time.strftime(TIMESTAMP_FORMAT, time.localtime(time.time() - 1800))


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) to ms.

    Raises:
        ValueError: not of that form.
    """
    return int(datetime.datetime.strptime(text, TIMESTAMP_FORMAT).timestamp() * 1000)


class StartOffsets:
    """Computes a new queue's first offset for one consumer."""

    def __init__(self, store: OffsetStore, offsets: OffsetLookup, where: ConsumeFromWhere,
                 timestamp: str) -> None:
        self.store = store
        self.offsets = offsets
        self.where = where
        self.timestamp = timestamp

    async def compute(self, mq: MessageQueue) -> int:
        """`computePullFromWhereWithException`.

        Raises:
            OffsetUnknownError: no decision this round.
        """
        last = await self.store.read(mq, ReadOffsetType.STORE)
        if last >= 0:
            return last
        if last != NO_OFFSET:
            raise OffsetUnknownError(f"offset of {mq} could not be read")
        retry = mq.topic.startswith(RETRY_PREFIX)
        try:
            if self.where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if self.where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
                if retry:
                    return await self.offsets.max_offset(mq)
                return await self.offsets.search_offset(
                    mq, parse_consume_timestamp(self.timestamp))
            return 0 if retry else await self.offsets.max_offset(mq)
        except ClientError as exc:
            raise OffsetUnknownError(f"start offset of {mq}: {exc}") from exc


class OffsetLookup:
    """GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP / GET_MIN_OFFSET at a queue's master."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    async def _addr(self, mq: MessageQueue) -> str:
        addr = await self.instance.master_addr_of(mq)
        if addr is None:
            raise OffsetUnknownError(f"The broker[{mq.broker_name}] not exist")
        return addr

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.instance.api.max_offset(await self._addr(mq), mq.topic, mq.queue_id)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.instance.api.min_offset(await self._addr(mq), mq.topic, mq.queue_id)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.instance.api.search_offset(await self._addr(mq), mq.topic,
                                                     mq.queue_id, timestamp_ms)
