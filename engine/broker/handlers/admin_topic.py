"""Broker handlers: topic administration (create, delete, list, stats, who consumes)."""

from __future__ import annotations

import dataclasses
import logging

from engine.broker.state import BrokerState
from engine.broker.topics import KEEP_QUEUES_OF, topic_name_problem
from engine.protocol import attributes as attrs
from engine.protocol import fastjson
from engine.protocol.body.admin import GroupList, TopicOffset, TopicStatsTable
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import TopicList
from engine.protocol.body.topic import TopicConfig, TopicConfigAndQueueMapping
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from engine.protocol.wire import from_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.broker")

Ctx = RequestContext[BrokerState]

#: The signed key whose MIXED value is refused unless enableMixedMessageType.
MIXED_KEY = attrs.ADD + attrs.MESSAGE_TYPE.name
#: 4.9.7 `validateSlave` remark, shared by the topic and subscription-group mutations.
SLAVE_REFUSAL = ("Can't modify topic or subscription group from slave broker, "
                 "please execute it from master broker.")


def slave_refusal(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand | None:
    """SYSTEM_ERROR on a slave (`validateSlave`), None on a master."""
    if ctx.state.is_slave:
        return cmd.response(ResponseCode.SYSTEM_ERROR, SLAVE_REFUSAL)
    return None


def system_topic_refusal(ctx: Ctx, cmd: RemotingCommand, topic: str) -> RemotingCommand | None:
    if ctx.state.topics.is_system_topic(topic):
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The topic[{topic}] is conflict with system topic.")
    return None


def body(value: object) -> bytes:
    """A body as a Java broker writes it (fastjson, unquoted non-string map keys)."""
    return fastjson.dumpb(to_json(value))


def remove_unused_queues(state: BrokerState) -> list[str]:
    """`cleanUnusedTopic`: destroy the consume queues of every topic no longer configured."""
    removed = state.store.clean_unused_topics(set(state.topics.table) | KEEP_QUEUES_OF)
    if removed:
        log.info("consume queues of unused topics removed: %s", ", ".join(removed))
    return removed


# ---------------------------------------------------------------------------- mutations


@router.handles(RequestCode.UPDATE_AND_CREATE_TOPIC)
async def update_and_create_topic(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    refused = slave_refusal(ctx, cmd)
    if refused is not None:
        return refused
    header = from_ext(CreateTopicRequestHeader, cmd.ext_fields)
    log.info("updateAndCreateTopic called by %s", ctx.connection.remote_addr)
    problem = topic_name_problem(header.topic)
    if problem is not None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
    refused = system_topic_refusal(ctx, cmd, header.topic)
    if refused is not None:
        return refused
    try:
        modification = attrs.parse_modification(header.attributes)
    except attrs.AttributeProblem as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    if (not ctx.state.config.enable_mixed_message_type
            and modification.get(MIXED_KEY) == attrs.TopicMessageType.MIXED):
        return cmd.response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
    try:
        attributes = ctx.state.topics.attributes_after(header.topic, modification)
    except attrs.AttributeProblem as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    # Like 4.9.7, `order` is not stored: ordering lives in the name server's KV config.
    ctx.state.topics.put(TopicConfig(
        header.topic, header.read_queue_nums, header.write_queue_nums, header.perm,
        header.topic_filter_type, header.topic_sys_flag or 0, attributes=attributes or None))
    # Registered before the answer, as Apache's registerIncrementBrokerData: a registration
    # still under way could otherwise bring back a route the creator deletes next.
    if ctx.state.register_now is not None:
        await ctx.state.register_now()
    return cmd.response()


@router.handles(RequestCode.DELETE_TOPIC_IN_BROKER)
def delete_topic(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    # A slave takes it too (4.9.7's validateSlave refuses it): it would drop the topic at
    # its next metadata sync anyway, and a promotion before that must not find it.
    # Creating a topic stays the master's.
    topic = from_ext(DeleteTopicRequestHeader, cmd.ext_fields).topic
    log.info("deleteTopic %s called by %s", topic, ctx.connection.remote_addr)
    refused = system_topic_refusal(ctx, cmd, topic)
    if refused is not None:
        return refused
    st = ctx.state
    st.topics.delete(topic)
    st.offsets.remove_topic(topic)  # written by the periodic offset flush, as in 4.9.7
    remove_unused_queues(st)
    return cmd.response()


# ---------------------------------------------------------------------------- queries


@router.handles(RequestCode.GET_ALL_TOPIC_CONFIG)
def get_all_topic_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=body(ctx.state.topics.wrapper()))


@router.handles(RequestCode.GET_TOPIC_CONFIG)
def get_topic_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """5.x: one topic's config with its attributes (the 5.x proxy reads `message.type` here)."""
    topic = from_ext(GetTopicConfigRequestHeader, cmd.ext_fields).topic
    config = ctx.state.topics.get(topic)
    if config is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                            f"No topic in this broker. topic: {topic}")
    answer = TopicConfigAndQueueMapping(**{f.name: getattr(config, f.name)
                                           for f in dataclasses.fields(config)})
    return cmd.response(body=body(answer))


@router.handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
def get_system_topic_list(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=body(TopicList(sorted(ctx.state.topics.system_topics))))


def topic_offset(state: BrokerState, topic: str, queue_id: int) -> TopicOffset:
    store = state.store
    low = max(store.get_min_offset_in_queue(topic, queue_id), 0)
    high = max(store.get_max_offset_in_queue(topic, queue_id), 0)
    last = store.get_message_store_timestamp(topic, queue_id, high - 1) if high > 0 else 0
    return TopicOffset(low, high, last)


@router.handles(RequestCode.GET_TOPIC_STATS_INFO)
def get_topic_stats_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    topic = from_ext(GetTopicStatsInfoRequestHeader, cmd.ext_fields).topic
    st = ctx.state
    config = st.topics.get(topic)
    if config is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    name = st.config.broker_name
    table = {MessageQueue(topic, name, q): topic_offset(st, topic, q)
             for q in range(config.write_queue_nums)}
    return cmd.response(body=body(TopicStatsTable(table)))


@router.handles(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO)
def query_topic_consume_by_who(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    topic = from_ext(QueryTopicConsumeByWhoRequestHeader, cmd.ext_fields).topic
    st = ctx.state
    groups = st.consumers.groups_subscribing(topic) | st.offsets.groups_of_topic(topic)
    return cmd.response(body=body(GroupList(frozenset(groups))))
