"""Broker calls on one queue's offsets: committed, min, max, by time, earliest store time.

How this works: each request names a topic and queue id and answers in a one-field header
(`offset` or `timestamp`), which Apache's client reads without a null check; a missing
field here is a `BadResponseError`.  Offsets are logical (consume-queue) offsets; the max
offset is the next one to be written.
"""

from __future__ import annotations

from engine.client.core.broker_call import BrokerCalls
from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import QueueId, Topic
from engine.protocol.codes import RequestCode
from engine.protocol.header.broker import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    Offset,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    TimestampMs,
    UpdateConsumerOffsetRequestHeader,
)
from engine.protocol.wire import to_ext


class OffsetCalls(BrokerCalls):
    """Offsets of one queue on one broker."""

    async def consumer_offset(self, addr: str, group: GroupName, topic: Topic,
                              queue_id: QueueId) -> Offset:
        """QUERY_CONSUMER_OFFSET (14): the offset the group committed for the queue.

        Raises:
            QueryNotFoundError: the group has committed none (and the queue's first message
                is no longer in memory).
        """
        header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
        answer = await self._header(QueryConsumerOffsetResponseHeader, addr,
                                    RequestCode.QUERY_CONSUMER_OFFSET, to_ext(header))
        return answer.offset

    async def update_consumer_offset(self, addr: str, group: GroupName, topic: Topic,
                                     queue_id: QueueId, offset: Offset) -> None:
        """UPDATE_CONSUMER_OFFSET (15), answered (clients usually send it oneway).

        This engine's slave brokers answer SUCCESS and keep their master's offsets.
        """
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, to_ext(header))

    async def max_offset(self, addr: str, topic: Topic, queue_id: QueueId) -> Offset:
        """GET_MAX_OFFSET (30): the offset the queue's next message will get."""
        header = GetMaxOffsetRequestHeader(topic, queue_id)
        answer = await self._header(GetMaxOffsetResponseHeader, addr,
                                    RequestCode.GET_MAX_OFFSET, to_ext(header))
        return answer.offset

    async def min_offset(self, addr: str, topic: Topic, queue_id: QueueId) -> Offset:
        """GET_MIN_OFFSET (31): the offset of the queue's oldest message still stored."""
        header = GetMinOffsetRequestHeader(topic, queue_id)
        answer = await self._header(GetMinOffsetResponseHeader, addr,
                                    RequestCode.GET_MIN_OFFSET, to_ext(header))
        return answer.offset

    async def search_offset(self, addr: str, topic: Topic, queue_id: QueueId,
                            timestamp: TimestampMs) -> Offset:
        """SEARCH_OFFSET_BY_TIMESTAMP (29): the offset of the first message stored at or
        after `timestamp` (ms), as the broker's binary search finds it."""
        header = SearchOffsetRequestHeader(topic, queue_id, timestamp)
        answer = await self._header(SearchOffsetResponseHeader, addr,
                                    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, to_ext(header))
        return answer.offset

    async def earliest_msg_store_time(self, addr: str, topic: Topic,
                                      queue_id: QueueId) -> TimestampMs:
        """GET_EARLIEST_MSG_STORETIME (32): store time (ms) of the queue's oldest message;
        -1 when the queue holds none."""
        header = GetEarliestMsgStoretimeRequestHeader(topic, queue_id)
        answer = await self._header(GetEarliestMsgStoretimeResponseHeader, addr,
                                    RequestCode.GET_EARLIEST_MSG_STORETIME, to_ext(header))
        return answer.timestamp
