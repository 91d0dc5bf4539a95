"""Offsets: QUERY_/UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME."""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]


@router.handles(RequestCode.QUERY_CONSUMER_OFFSET)
def query_consumer_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """The committed offset; for a group with none, 0 while the queue still starts at 0 and its
    first message is in memory (4.9.7; the C++ push consumer relies on it), else 22."""
    st = ctx.state
    h = from_ext(QueryConsumerOffsetRequestHeader, cmd.ext_fields)
    offset = st.offsets.query(h.consumer_group, h.topic, h.queue_id)
    if offset < 0:
        min_offset = st.store.get_min_offset_in_queue(h.topic, h.queue_id)
        if min_offset <= 0 and not st.store.check_in_disk_by_consume_offset(h.topic,
                                                                           h.queue_id, 0):
            offset = 0
    if offset < 0:
        return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    return cmd.response(ext_fields=to_ext(QueryConsumerOffsetResponseHeader(offset)))


@router.handles(RequestCode.UPDATE_CONSUMER_OFFSET)
def update_consumer_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    h = from_ext(UpdateConsumerOffsetRequestHeader, cmd.ext_fields)
    if st.is_slave:
        # Stored, as 4.9.7 does; the slave sync hands it to the master (slave_sync.py).
        st.slave_commits[(h.consumer_group, h.topic, h.queue_id)] = h.commit_offset
    st.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
    return cmd.response()


@router.handles(RequestCode.GET_MAX_OFFSET)
def get_max_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(GetMaxOffsetRequestHeader, cmd.ext_fields)
    offset = ctx.state.store.get_max_offset_in_queue(h.topic, h.queue_id)
    return cmd.response(ext_fields=to_ext(GetMaxOffsetResponseHeader(offset)))


@router.handles(RequestCode.GET_MIN_OFFSET)
def get_min_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(GetMinOffsetRequestHeader, cmd.ext_fields)
    offset = ctx.state.store.get_min_offset_in_queue(h.topic, h.queue_id)
    return cmd.response(ext_fields=to_ext(GetMinOffsetResponseHeader(offset)))


@router.handles(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
def search_offset_by_timestamp(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(SearchOffsetRequestHeader, cmd.ext_fields)
    offset = ctx.state.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
    return cmd.response(ext_fields=to_ext(SearchOffsetResponseHeader(offset)))


@router.handles(RequestCode.GET_EARLIEST_MSG_STORETIME)
def get_earliest_msg_storetime(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(GetEarliestMsgStoretimeRequestHeader, cmd.ext_fields)
    timestamp = ctx.state.store.get_earliest_message_time(h.topic, h.queue_id)
    return cmd.response(ext_fields=to_ext(GetEarliestMsgStoretimeResponseHeader(timestamp)))
