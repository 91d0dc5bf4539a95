"""Message queries: QUERY_MESSAGE (by key or unique key, within a time range) and
VIEW_MESSAGE_BY_ID (by commit-log offset)."""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


@router.handles(RequestCode.QUERY_MESSAGE)
def query_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    h = from_ext(QueryMessageRequestHeader, cmd.ext_fields)
    max_num = h.max_num
    if cmd.ext(UNIQUE_KEY_QUERY) == "true":
        max_num = st.store_config.default_query_max_num
    # On the loop, not in a thread: the dispatcher writes the same index files, and a
    # lookup is bounded by maxNum (at most maxMsgsNumBatch records).
    result = st.store.query_message(h.topic, h.key, max_num, h.begin_timestamp,
                                    h.end_timestamp)
    ext = to_ext(QueryMessageResponseHeader(result.index_last_update_timestamp,
                                            result.index_last_update_phyoffset))
    if not result.messages:
        return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                            "can not find message, maybe time range not correct",
                            ext_fields=ext)
    return cmd.response(ext_fields=ext, body=result.body)


@router.handles(RequestCode.VIEW_MESSAGE_BY_ID)
def view_message_by_id(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(ViewMessageRequestHeader, cmd.ext_fields)
    record = ctx.state.store.look_message_by_offset(h.offset)
    if record is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"can not find message by the offset, {h.offset}")
    return cmd.response(body=record)
