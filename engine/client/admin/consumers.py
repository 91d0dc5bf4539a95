"""Broker admin calls about consumers and producers: stats, connections, resets, relayed calls.

How this works: stats and connection lists are read from the broker's own tables; the stats
calls walk every queue of the group, so, as in Apache's mqadmin, they get three timeouts
(`relayed_timeout`).  GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are relayed by
the broker to one consumer's connection and the consumer's answer comes back as is, so they
wait `relayed_timeout` too (the broker waits up to 10 s for the consumer and answers
CONSUME_MSG_TIMEOUT when it gives up).  INVOKE_BROKER_TO_RESET_OFFSET moves the committed
offsets and tells every online consumer; the answer is the new offset of each queue.  Tables
keyed by `MessageQueue` arrive from Java brokers with the queue object as an unquoted key,
which `fastjson.loads` and `wire.from_json` read.
"""

from __future__ import annotations

from engine.client.core.broker_call import BrokerCalls, decode_body
from engine.protocol.body.admin import (
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    GetConsumerListByGroupResponseBody,
    GetConsumerStatusBody,
    ProducerConnection,
    ProducerTableInfo,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QueueTimeSpan,
    ResetOffsetBody,
)
from engine.protocol.body.heartbeat import ClientId, GroupName
from engine.protocol.body.message_queue import MessageQueue, QueueId, Topic
from engine.protocol.codes import LanguageCode, RequestCode
from engine.protocol.header.broker import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    MsgId,
    Offset,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ResetOffsetRequestHeader,
    TimestampMs,
)
from engine.protocol.wire import to_ext

#: `timestamp` of a reset that moves every queue to its max offset (skip the backlog).
RESET_TO_MAX = -1


class ConsumerCalls(BrokerCalls):
    """Consumer groups and producer groups as one broker sees them."""

    # ------------------------------------------------------------------------ stats

    async def consume_stats(self, addr: str, group: GroupName,
                            topic: Topic | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS (208): broker and consumer offset of each queue the group reads
        on this broker (of `topic`, or of every topic the group has offsets for)."""
        header = GetConsumeStatsRequestHeader(group, topic)
        return await self._body(ConsumeStats, addr, RequestCode.GET_CONSUME_STATS,
                                to_ext(header), timeout=self.relayed_timeout)

    async def broker_consume_stats(self, addr: str, *,
                                   order_only: bool = False) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS (317): consume stats of every group on the broker
        (of ordered topics only with `order_only`), with the broker's total lag."""
        header = GetConsumeStatsInBrokerHeader(order_only)
        return await self._body(ConsumeStatsList, addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                to_ext(header), timeout=self.relayed_timeout)

    async def consume_time_span(self, addr: str, topic: Topic,
                                group: GroupName) -> list[QueueTimeSpan]:
        """QUERY_CONSUME_TIME_SPAN (303): per queue, the store times of the oldest, newest and
        last consumed message, and how far the group lags behind in ms.

        Raises:
            TopicNotExistError: the broker has no such topic.
        """
        header = QueryConsumeTimeSpanRequestHeader(topic, group)
        body = await self._body(QueryConsumeTimeSpanBody, addr,
                                RequestCode.QUERY_CONSUME_TIME_SPAN, to_ext(header))
        return body.consume_time_span_set

    # ------------------------------------------------------------------------ connections

    async def consumer_connections(self, addr: str, group: GroupName) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (203): the group's clients and subscriptions.

        Raises:
            ConsumerNotOnlineError: no client of the group is connected to this broker.
        """
        header = GetConsumerConnectionListRequestHeader(group)
        return await self._body(ConsumerConnection, addr,
                                RequestCode.GET_CONSUMER_CONNECTION_LIST, to_ext(header))

    async def producer_connections(self, addr: str, group: GroupName) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST (204): the producer group's clients.

        Raises:
            ServerSystemError: no producer of the group is connected ("the producer group[..]
                not exist").
        """
        header = GetProducerConnectionListRequestHeader(group)
        return await self._body(ProducerConnection, addr,
                                RequestCode.GET_PRODUCER_CONNECTION_LIST, to_ext(header))

    async def all_producer_info(self, addr: str) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO (328): every connected producer, by group.

        Raises:
            RequestCodeNotSupportedError: an older broker without this request.
        """
        return await self._body(ProducerTableInfo, addr, RequestCode.GET_ALL_PRODUCER_INFO)

    async def consumer_ids(self, addr: str, group: GroupName) -> list[ClientId]:
        """GET_CONSUMER_LIST_BY_GROUP (38): client ids of the group's online consumers.

        Raises:
            ServerSystemError: no consumer of the group is online ("no consumer for this
                group"), as Apache brokers answer.
        """
        header = GetConsumerListByGroupRequestHeader(group)
        body = await self._body(GetConsumerListByGroupResponseBody, addr,
                                RequestCode.GET_CONSUMER_LIST_BY_GROUP, to_ext(header))
        return body.consumer_id_list

    # ------------------------------------------------------------------------ relayed calls

    async def consumer_running_info(self, addr: str, group: GroupName, client_id: ClientId,
                                    *, jstack: bool = False,
                                    timeout: float | None = None) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (307), relayed by the broker to the consumer.

        Raises:
            ServerSystemError: the client is not online on this broker, or too old.
            ConsumeMsgTimeoutError: the client did not answer the broker in time.
        """
        header = GetConsumerRunningInfoRequestHeader(group, client_id, jstack)
        return await self._body(ConsumerRunningInfo, addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                to_ext(header), timeout=timeout or self.relayed_timeout)

    async def consume_message_directly(self, addr: str, group: GroupName, client_id: ClientId,
                                       offset_msg_id: MsgId, *,
                                       timeout: float | None = None
                                       ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (309): have one consumer consume a stored message again.

        Args:
            addr: the broker storing the message (`message_store_addr(offset_msg_id)`).
            offset_msg_id: the message's offset id (not its UNIQ_KEY).

        Raises:
            ServerSystemError: the message or the client is not on this broker.
            ConsumeMsgTimeoutError: the client did not answer the broker in time.
        """
        header = ConsumeMessageDirectlyResultRequestHeader(group, client_id, offset_msg_id)
        return await self._body(ConsumeMessageDirectlyResult, addr,
                                RequestCode.CONSUME_MESSAGE_DIRECTLY, to_ext(header),
                                timeout=timeout or self.relayed_timeout)

    async def consumer_status(self, addr: str, topic: Topic, group: GroupName, *,
                              client_id: ClientId | None = None,
                              timeout: float | None = None) -> GetConsumerStatusBody:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): each online client's offsets of
        `topic` (only `client_id`'s when given), as the clients report them.

        Raises:
            ServerSystemError: no consumer of the group is online, or one is too old.
        """
        header = GetConsumerStatusRequestHeader(topic, group, client_id)
        return await self._body(GetConsumerStatusBody, addr,
                                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                to_ext(header), timeout=timeout or self.relayed_timeout)

    # ------------------------------------------------------------------------ offsets

    async def reset_offset(self, addr: str, topic: Topic, group: GroupName,
                           timestamp: TimestampMs, *, force: bool = True,
                           cpp_clients: bool = False,
                           timeout: float | None = None) -> dict[MessageQueue, Offset]:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): move the group's offsets of `topic` on this
        broker to the first message stored at or after `timestamp` (`RESET_TO_MAX`: to the
        end), and tell the online consumers.

        Args:
            force: move forward as well; without it a queue only moves back.
            cpp_clients: the consumers are C++ clients (the broker then sends them the list
                form of the table they read).

        Returns:
            The new offset of each queue.

        Raises:
            ConsumerNotOnlineError: no consumer of the group is online (use
                `update_consumer_offset` per queue instead, as Apache's mqadmin does).
            ServerSystemError: the topic is not on this broker, the group has no offsets, or
                a client is too old.
        """
        header = ResetOffsetRequestHeader(topic, group, timestamp, force)
        resp = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, to_ext(header),
                                timeout=timeout or self.relayed_timeout,
                                language=LanguageCode.CPP if cpp_clients else None)
        if not resp.body:
            return {}
        return decode_body(ResetOffsetBody, resp.body, addr).offset_table

    async def correction_offsets(self, addr: str, topic: Topic, compare_group: GroupName, *,
                                 filter_groups: tuple[GroupName, ...] = ()
                                 ) -> dict[QueueId, Offset]:
        """QUERY_CORRECTION_OFFSET (308): per queue, the smallest offset still in the queue
        that the topic's groups (but `filter_groups`) committed; 2**63-1 where
        `compare_group`'s own offset is behind it."""
        header = QueryCorrectionOffsetHeader(compare_group, topic,
                                             ",".join(filter_groups) or None)
        body = await self._body(QueryCorrectionOffsetBody, addr,
                                RequestCode.QUERY_CORRECTION_OFFSET, to_ext(header))
        return body.correction_offsets
