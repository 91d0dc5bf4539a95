"""Broker handlers: subscription groups and the offset tables (consumer and delay offsets)."""

from __future__ import annotations

import logging
from dataclasses import replace

from engine.broker.handlers.admin_topic import body, slave_refusal
from engine.broker.state import BrokerState
from engine.protocol import attributes as attrs
from engine.protocol.body.decode import request_body
from engine.protocol.body.offsets import ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    CloneGroupOffsetRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
)
from engine.protocol.wire import from_ext
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.broker")

Ctx = RequestContext[BrokerState]


@router.handles(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
def update_and_create_subscription_group(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    refused = slave_refusal(ctx, cmd)
    if refused is not None:
        return refused
    log.info("updateAndCreateSubscriptionGroup called by %s", ctx.connection.remote_addr)
    config = request_body(cmd, SubscriptionGroupConfig)
    if not config.group_name or not config.group_name.strip():
        return cmd.response(ResponseCode.SYSTEM_ERROR, "the SubscriptionGroupConfig has no "
                            "groupName; name the group to create or update")
    current = ctx.state.groups.get(config.group_name)
    try:  # 5.3 defines no group attribute: any change is refused, as Apache refuses it
        attributes = attrs.alter((current.attributes if current else None) or {},
                                 config.attributes or {}, create=current is None,
                                 known=attrs.GROUP_ATTRIBUTES)
    except attrs.AttributeProblem as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    ctx.state.groups.put(replace(config, attributes=attributes or None))
    return cmd.response()


@router.handles(RequestCode.DELETE_SUBSCRIPTIONGROUP)
def delete_subscription_group(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    refused = slave_refusal(ctx, cmd)
    if refused is not None:
        return refused
    header = from_ext(DeleteSubscriptionGroupRequestHeader, cmd.ext_fields)
    log.info("deleteSubscriptionGroup %s (removeOffset=%s) called by %s", header.group_name,
             header.remove_offset, ctx.connection.remote_addr)
    st = ctx.state
    st.groups.delete(header.group_name)
    if header.remove_offset:  # offsets are written by the periodic flush, as in 4.9.7
        st.offsets.remove_group(header.group_name)
    return cmd.response()


@router.handles(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG)
def get_subscription_group(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """5.x: one group's config (the 5.x proxy reads consumeMessageOrderly here); created on
    first use when autoCreateSubscriptionGroup allows, as `findSubscriptionGroupConfig`."""
    group = from_ext(GetSubscriptionGroupConfigRequestHeader, cmd.ext_fields).group
    config = ctx.state.groups.find_or_create(group)
    if config is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
    return cmd.response(body=body(config))


@router.handles(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
def get_all_subscription_group(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=body(ctx.state.groups.wrapper()))


@router.handles(RequestCode.GET_ALL_CONSUMER_OFFSET)
def get_all_consumer_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    table = {key: dict(queues) for key, queues in ctx.state.offsets.table.items()}
    return cmd.response(body=body(ConsumerOffsetSerializeWrapper(table)))


@router.handles(RequestCode.GET_ALL_DELAY_OFFSET)
def get_all_delay_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """Delay level -> next offset of SCHEDULE_TOPIC_XXXX queue level-1 (delayOffset.json)."""
    table = dict(sorted(ctx.state.schedule.offsets.items()))
    return cmd.response(body=body(DelayOffsetSerializeWrapper(table)))


@router.handles(RequestCode.CLONE_GROUP_OFFSET)
def clone_group_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(CloneGroupOffsetRequestHeader, cmd.ext_fields)
    st = ctx.state
    topics = {header.topic} if header.topic and header.topic.strip() else (
        st.offsets.topics_of_group(header.src_group))
    cloned = []  # offsets are written by the periodic flush, as in 4.9.7
    for topic in sorted(topics):
        if st.topics.get(topic) is None:
            log.warning("cloneGroupOffset: topic %s does not exist, skipped", topic)
            continue
        if (not header.offline and st.consumers.subscription_count(header.src_group) > 0
                and st.consumers.find_subscription(header.src_group, topic) is None):
            log.warning("cloneGroupOffset: online group %s does not subscribe %s, skipped",
                        header.src_group, topic)
            continue
        if st.offsets.clone(header.src_group, header.dest_group, topic):
            cloned.append(topic)
    log.info("cloneGroupOffset %s -> %s: %s", header.src_group, header.dest_group, cloned)
    return cmd.response()
