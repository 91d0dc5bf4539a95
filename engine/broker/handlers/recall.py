"""RECALL_MESSAGE (370, 5.3): withdraw a timer message before its time, by its recall handle.

How this works (5.3.3 `RecallMessageProcessor`): after 5.3's checks, in its order and with its
codes and remarks (recallMessageEnable, role, start time, permission, topic, the handle, its
topic, broker name and time), the broker stores a delete marker: a timer message of the
handle's topic for the handle's time (so it parks in the same timer slot as the message it
withdraws), body "0", tag `_RECALL_TAG_`, TIMER_DEL_UNIQKEY = "TOPIC+MESSAGE_ID" and the
message's UNIQ_KEY; the timer store then delivers neither (`engine.store.timer`).  The
answer names the message id.  A handle is made by the send handler (`send.recall_handle`)
for each timer message it parks.
"""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import RecallMessageRequestHeader, RecallMessageResponseHeader
from engine.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    BrokerMessage,
    properties_to_string,
)
from engine.protocol.perm import is_writeable
from engine.protocol.recall import RecallHandle, RecallHandleError, decode_handle
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.address import parse_addr
from engine.remoting.router import RequestContext, Router
from engine.store.results import PutMessageStatus
from engine.store.timer.transform import build_delete_key

router = Router()

Ctx = RequestContext[BrokerState]

RECALL_TAG = "_RECALL_TAG_"
NOT_AVAILABLE = "recall failed, broker service not available"
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})


class _Refusal(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def _checked(st: BrokerState, header: RecallMessageRequestHeader) -> RecallHandle:
    cfg = st.config
    if not cfg.recall_message_enable:
        raise _Refusal(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
    if st.is_slave:
        raise _Refusal(ResponseCode.SLAVE_NOT_AVAILABLE, NOT_AVAILABLE)
    if st.clock() < cfg.start_accept_send_request_time_stamp:
        raise _Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, NOT_AVAILABLE)
    if not is_writeable(cfg.broker_permission) and not cfg.allow_recall_when_broker_not_writeable:
        raise _Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, NOT_AVAILABLE)
    if st.topics.get(header.topic) is None:
        raise _Refusal(ResponseCode.TOPIC_NOT_EXIST,
                       f"recall failed, the topic[{header.topic}] not exist")
    try:
        handle = decode_handle(header.recall_handle)
    except RecallHandleError as exc:
        raise _Refusal(ResponseCode.ILLEGAL_OPERATION, str(exc)) from None
    if header.topic != handle.topic:
        raise _Refusal(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
    if cfg.broker_name != handle.broker_name:
        raise _Refusal(ResponseCode.ILLEGAL_OPERATION, NOT_AVAILABLE)
    left = handle.timestamp_ms - st.clock()
    if left <= 0 or left >= st.store_config.timer_max_delay_sec * 1000:
        raise _Refusal(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    return handle


def delete_marker(st: BrokerState, header: RecallMessageRequestHeader, handle: RecallHandle,
                  peer: str) -> BrokerMessage:
    """The timer message that withdraws the one `handle` names (5.3 `buildMessage`)."""
    now = st.clock()
    props = {
        PROPERTY_TAGS: RECALL_TAG,
        PROPERTY_TIMER_DEL_UNIQKEY: build_delete_key(handle.topic, handle.message_id),
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
        PROPERTY_TIMER_DELIVER_MS: handle.timestamp,
        "BORN_TIMESTAMP": str(now),
        "TRACE_CONTEXT": "",
        PROPERTY_PRODUCER_GROUP: header.producer_group,
    }
    try:
        born_host = parse_addr(peer)
    except ValueError:
        born_host = ("127.0.0.1", 0)
    return BrokerMessage(handle.topic, b"0", 0, 0, properties_to_string(props), 0, now,
                         born_host, st.store_host)


@router.handles(RequestCode.RECALL_MESSAGE)
async def recall_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    header = from_ext(RecallMessageRequestHeader, cmd.ext_fields)
    region = {"MSG_REGION": st.config.region_id}
    try:
        handle = _checked(st, header)
    except _Refusal as refusal:
        return cmd.response(refusal.code, refusal.remark, ext_fields=region)
    result = await st.store.put_message(delete_marker(st, header, handle,
                                                      ctx.connection.remote_addr))
    if result.status not in _STORED:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error",
                            ext_fields=region)
    ext = {**to_ext(RecallMessageResponseHeader(handle.message_id)), **region}
    return cmd.response(ResponseCode.SUCCESS, ext_fields=ext)
