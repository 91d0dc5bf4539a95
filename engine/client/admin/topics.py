"""Broker admin calls for topics and subscription groups (configs, stats, offset tables).

How this works: mutations (create, delete, clone) answer SUCCESS without a body; reads decode
the broker's body into the engine's body dataclasses.  Fields newer brokers add (5.x
`forbiddenTable`, `topicPutTps`, ...) are ignored; topic `attributes` are read (5.x; a 4.x
broker's topics have none).  DELETE_SUBSCRIPTIONGROUP carries the "also drop the offsets"
flag under both names, 4.9's `removeOffset` and 5.x's `cleanOffset`; each broker reads its
own and ignores the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.client.core.broker_call import BrokerCalls
from engine.client.core.errors import BadResponseError
from engine.protocol import fastjson
from engine.protocol.attributes import format_modification
from engine.protocol.body.admin import GroupList, TopicStatsTable
from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import Topic
from engine.protocol.body.offsets import (
    ConsumerOffsetSerializeWrapper,
    DelayLevel,
    DelayOffsetSerializeWrapper,
    Offset,
)
from engine.protocol.body.route import TopicList
from engine.protocol.body.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from engine.protocol.body.topic import (
    TopicConfig,
    TopicConfigAndQueueMapping,
    TopicConfigSerializeWrapper,
)
from engine.protocol.codes import RequestCode
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    CloneGroupOffsetRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from engine.protocol.wire import from_json, to_ext, to_json

#: The template topic a topic is created from (`TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
DEFAULT_TOPIC = "TBW102"


@dataclass(frozen=True, slots=True)
class DelayOffsets:
    """GET_ALL_DELAY_OFFSET: the body as the broker wrote it, and its table parsed."""

    text: str
    offset_table: dict[DelayLevel, Offset] = field(default_factory=dict)


class TopicGroupCalls(BrokerCalls):
    """Topics and subscription groups of one broker."""

    # ------------------------------------------------------------------------ topics

    async def create_topic(self, addr: str, config: TopicConfig, *,
                           default_topic: Topic = DEFAULT_TOPIC,
                           attributes: Mapping[str, str] | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC (17): create the topic or replace its config.

        The broker then registers the change with its name servers.  `config.attributes`
        is not sent: a 5.x broker keeps the topic's attributes unless `attributes` changes
        them (signed keys, `{"+message.type": "FIFO", "-reserve.time": ""}`; a 4.x broker
        ignores them).

        Raises:
            ServerSystemError: a slave broker, an illegal name, a system topic, or (5.x) an
                attribute change the broker refuses.
            ServerError: (5.x) INVALID_PARAMETER for `message.type=MIXED`.
        """
        header = CreateTopicRequestHeader(
            config.topic_name, default_topic, config.read_queue_nums, config.write_queue_nums,
            config.perm, config.topic_filter_type, config.order, config.topic_sys_flag,
            format_modification(attributes) if attributes else None)
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))

    async def topic_config(self, addr: str, topic: Topic) -> TopicConfigAndQueueMapping:
        """GET_TOPIC_CONFIG (351, RocketMQ 5): one topic's config with its attributes.

        Raises:
            TopicNotExistError: the broker has no such topic.
            RequestCodeNotSupportedError: a 4.x broker (it keeps no attributes).
        """
        return await self._body(TopicConfigAndQueueMapping, addr, RequestCode.GET_TOPIC_CONFIG,
                                to_ext(GetTopicConfigRequestHeader(topic)))

    async def delete_topic(self, addr: str, topic: Topic) -> None:
        """DELETE_TOPIC_IN_BROKER (215): drop the config, offsets and queues of the topic.

        Raises:
            ServerSystemError: a slave broker or a system topic.
        """
        await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                         to_ext(DeleteTopicRequestHeader(topic)))

    async def all_topic_config(self, addr: str) -> TopicConfigSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG (21): every topic config and the table's data version.

        Raises:
            BadResponseError: the body is not a topic table.
        """
        return await self._body(TopicConfigSerializeWrapper, addr,
                                RequestCode.GET_ALL_TOPIC_CONFIG)

    async def system_topics(self, addr: str) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the broker's system topics."""
        return await self._body(TopicList, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)

    async def topic_stats(self, addr: str, topic: Topic) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO (202): min/max offset and last store time of each queue.

        Raises:
            TopicNotExistError: the broker has no such topic.
        """
        return await self._body(TopicStatsTable, addr, RequestCode.GET_TOPIC_STATS_INFO,
                                to_ext(GetTopicStatsInfoRequestHeader(topic)))

    async def topic_consumed_by(self, addr: str, topic: Topic) -> GroupList:
        """QUERY_TOPIC_CONSUME_BY_WHO (300): groups subscribing or holding offsets of `topic`."""
        return await self._body(GroupList, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                to_ext(QueryTopicConsumeByWhoRequestHeader(topic)))

    # ------------------------------------------------------------------------ groups

    async def create_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): create the group or replace its config.

        Raises:
            ServerSystemError: a slave broker, or a config the broker refuses.
        """
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         body=fastjson.dumpb(to_json(config)))

    async def delete_group(self, addr: str, group: GroupName, *,
                           remove_offsets: bool = False) -> None:
        """DELETE_SUBSCRIPTIONGROUP (207); with `remove_offsets` its consumer offsets go too.

        Raises:
            ServerSystemError: a slave broker.
        """
        ext = to_ext(DeleteSubscriptionGroupRequestHeader(group, remove_offsets))
        ext["cleanOffset"] = ext["removeOffset"]  # the 5.x name of the same flag
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)

    async def group_config(self, addr: str, group: GroupName) -> SubscriptionGroupConfig:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352, RocketMQ 5): one group's config; the broker
        creates it on first use when autoCreateSubscriptionGroup allows.

        Raises:
            SubscriptionGroupNotExistError: no such group, and none is created.
            RequestCodeNotSupportedError: a 4.x broker.
        """
        return await self._body(SubscriptionGroupConfig, addr,
                                RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                                to_ext(GetSubscriptionGroupConfigRequestHeader(group)))

    async def all_group_config(self, addr: str) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): every group config and its data version."""
        return await self._body(SubscriptionGroupWrapper, addr,
                                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)

    async def all_consumer_offsets(self, addr: str) -> ConsumerOffsetSerializeWrapper:
        """GET_ALL_CONSUMER_OFFSET (43): `"topic@group"` -> queue id -> committed offset."""
        return await self._body(ConsumerOffsetSerializeWrapper, addr,
                                RequestCode.GET_ALL_CONSUMER_OFFSET)

    async def all_delay_offsets(self, addr: str) -> DelayOffsets:
        """GET_ALL_DELAY_OFFSET (45): delay level -> offset reached in its schedule queue.

        Returns:
            The body's text (Apache's mqadmin prints it as is) and the parsed table.

        Raises:
            BadResponseError: the body is not UTF-8 or not a delay-offset table.
        """
        resp = await self._call(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        raw = resp.body or b""
        try:
            text = raw.decode("utf-8")
            table = (from_json(DelayOffsetSerializeWrapper, fastjson.loads(raw)).offset_table
                     if raw.strip() else {})
        except (UnicodeDecodeError, ProtocolError) as exc:
            raise BadResponseError(f"delay offset body does not decode: {exc}", addr) from None
        return DelayOffsets(text, table)

    async def clone_group_offset(self, addr: str, src_group: GroupName, dest_group: GroupName,
                                 *, topic: Topic | None = None, offline: bool = False) -> None:
        """CLONE_GROUP_OFFSET (314): copy `src_group`'s offsets (of `topic`, or of every topic
        it has offsets for) to `dest_group`.  Unless `offline`, an online source group's
        unsubscribed topics are skipped."""
        header = CloneGroupOffsetRequestHeader(src_group, dest_group, topic, offline)
        await self._call(addr, RequestCode.CLONE_GROUP_OFFSET, to_ext(header))
