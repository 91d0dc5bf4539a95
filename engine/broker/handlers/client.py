"""Client management: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
CHECK_CLIENT_CONFIG."""

from __future__ import annotations

from engine.broker.clients import ClientChannel
from engine.broker.errors import Refused
from engine.broker.filters import compile_subscription
from engine.broker.state import BrokerState
from engine.broker.topics import retry_topic
from engine.protocol import fastjson
from engine.protocol.body.admin import GetConsumerListByGroupResponseBody
from engine.protocol.body.check_client import CheckClientRequestBody
from engine.protocol.body.decode import request_body
from engine.protocol.body.heartbeat import (
    PROXY_CLIENT_ADDR,
    PROXY_PROTOCOL,
    ExpressionType,
    HeartbeatData,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from engine.protocol.perm import PERM_RW
from engine.protocol.wire import from_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]

#: topicSysFlag bit of a unit-sub topic (`TopicSysFlag.FLAG_UNIT_SUB`).
FLAG_UNIT_SUB = 0x2


@router.handles(RequestCode.HEART_BEAT)
def heart_beat(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    data = request_body(cmd, HeartbeatData)
    now = st.clock()

    ext = cmd.ext_fields or {}
    protocol, client_addr = ext.get(PROXY_PROTOCOL), ext.get(PROXY_CLIENT_ADDR)

    def channel() -> ClientChannel:
        return ClientChannel(ctx.connection, data.client_id, cmd.language, cmd.version, now,
                             protocol, client_addr)

    for consumer in data.consumer_data_set:
        group = st.groups.find_or_create(consumer.group_name)
        if group is not None:
            st.topics.create_if_absent(retry_topic(consumer.group_name),
                                       group.retry_queue_nums, PERM_RW,
                                       FLAG_UNIT_SUB if consumer.unit_mode else 0)
        st.consumers.register(consumer, channel())
    for producer in data.producer_data_set:
        st.producers.register(producer.group_name, channel())
    return cmd.response()


@router.handles(RequestCode.UNREGISTER_CLIENT)
def unregister_client(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    h = from_ext(UnregisterClientRequestHeader, cmd.ext_fields)
    if h.producer_group:
        st.producers.unregister(h.producer_group, ctx.connection)
    if h.consumer_group:
        st.consumers.unregister(h.consumer_group, ctx.connection)
    return cmd.response()


@router.handles(RequestCode.GET_CONSUMER_LIST_BY_GROUP)
def get_consumer_list_by_group(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(GetConsumerListByGroupRequestHeader, cmd.ext_fields)
    info = ctx.state.consumers.get(h.consumer_group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"no consumer for this group, {h.consumer_group}")
    body = GetConsumerListByGroupResponseBody(info.client_ids())
    return cmd.response(body=fastjson.dumpb(to_json(body)))


@router.handles(RequestCode.CHECK_CLIENT_CONFIG)
def check_client_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    body = request_body(cmd, CheckClientRequestBody)
    sub = body.subscription_data
    if sub is None or sub.expression_type is ExpressionType.TAG:
        return cmd.response()
    try:
        compile_subscription(sub, ctx.state.config.enable_property_filter)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    return cmd.response()
