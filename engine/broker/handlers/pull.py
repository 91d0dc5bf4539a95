"""PULL_MESSAGE (11), with long polling.

How this works: the request is checked as 4.9.7 does (broker readable, group and topic known
and permitted, queue id in range, subscription from the request or from the consumer's
heartbeat), then the store reads up to maxMsgNums records.  When nothing is there yet and the
consumer allows suspension, the handler does not answer at once: it waits for the store to
report the queue grew, or for suspendTimeoutMillis (shortPollingTimeMills when long polling is
off), then reads again and answers.  A commit offset riding on the request is stored on a
master.  A slave answers PULL_RETRY_IMMEDIATELY (suggesting the master) unless
slaveReadEnable; with it, a master suggests the group's whichBrokerWhenConsumeSlowly when the
consumer reads data no longer in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from engine.broker.errors import Refused
from engine.broker.filters import message_filter
from engine.broker.state import BrokerState
from engine.protocol.body.heartbeat import ExpressionType, MessageModel, SubscriptionData
from engine.protocol.body.route import MASTER_ID
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import PullMessageRequestHeader, PullMessageResponseHeader
from engine.protocol.perm import is_readable
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router
from engine.store.message_filter import MessageFilter
from engine.store.results import GetMessageResult, GetMessageStatus

router = Router()

Ctx = RequestContext[BrokerState]

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _subscription(st: BrokerState, header: PullMessageRequestHeader) -> SubscriptionData:
    if header.sys_flag & FLAG_SUBSCRIPTION:
        try:
            expr = ExpressionType[header.expression_type or "TAG"]
        except KeyError:
            raise Refused(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                              f"unknown expression type {header.expression_type!r}; "
                              "use TAG or SQL92") from None
        return SubscriptionData.build(header.topic, header.subscription, expr,
                                      header.sub_version)
    info = st.consumers.get(header.consumer_group)
    if info is None:
        raise Refused(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                          f"the consumer's group info not exist{FAQ}")
    group_config = st.groups.get(header.consumer_group)
    if (info.message_model is MessageModel.BROADCASTING and group_config is not None
            and not group_config.consume_broadcast_enable):
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the consumer group[{header.consumer_group}] can not consume by "
                          "broadcast way")
    sub = info.subscriptions.get(header.topic)
    if sub is None:
        raise Refused(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                          f"the consumer's subscription not exist{FAQ}")
    if sub.sub_version < header.sub_version:
        raise Refused(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                          "the consumer's subscription not latest")
    return sub


def _check(st: BrokerState, header: PullMessageRequestHeader,
           peer: str) -> tuple[SubscriptionGroupConfig, MessageFilter | None]:
    cfg = st.config
    if not st.readable:
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the broker[{cfg.broker_ip1}] pulling message is forbidden")
    group = st.groups.find_or_create(header.consumer_group)
    if group is None:
        raise Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group [{header.consumer_group}] does not exist{FAQ}")
    if not group.consume_enable:
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"subscription group no permission, {header.consumer_group}")
    topic = st.topics.get(header.topic)
    if topic is None:
        raise Refused(ResponseCode.TOPIC_NOT_EXIST,
                          f"topic[{header.topic}] not exist, apply first please!{FAQ}")
    if not is_readable(topic.perm):
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the topic[{header.topic}] pulling message is forbidden")
    if not 0 <= header.queue_id < topic.read_queue_nums:
        raise Refused(ResponseCode.SYSTEM_ERROR,
                          f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                          f"topicConfig.readQueueNums:[{topic.read_queue_nums}] "
                          f"consumer:[{peer}]")
    sub = _subscription(st, header)
    return group, message_filter(sub, cfg.enable_property_filter)


_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def _answer(st: BrokerState, cmd: RemotingCommand, header: PullMessageRequestHeader,
            group: SubscriptionGroupConfig, result: GetMessageResult) -> RemotingCommand:
    status = result.status
    st.stats.on_pull(status is GetMessageStatus.FOUND)
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        code = (ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0
                else ResponseCode.PULL_NOT_FOUND)
    else:
        code = _CODES[status]
    next_begin = result.next_begin_offset
    if st.is_slave and not st.config.offset_check_in_slave:
        next_begin = header.queue_offset if code == ResponseCode.PULL_OFFSET_MOVED else next_begin
        if code == ResponseCode.PULL_OFFSET_MOVED:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
    if st.is_slave and not st.config.slave_read_enable:
        code = ResponseCode.PULL_RETRY_IMMEDIATELY  # 4.9.7: a slave serves reads only if told
    suggest = MASTER_ID
    if st.config.slave_read_enable:
        suggest = (group.which_broker_when_consume_slowly if result.suggest_pulling_from_slave
                   else group.broker_id)
    ext = to_ext(PullMessageResponseHeader(suggest, next_begin, result.min_offset,
                                           result.max_offset))
    if code == ResponseCode.SUCCESS:
        body = result.body
        st.stats.on_get(header.consumer_group, header.topic, result.message_count, len(body))
        return cmd.response(code, status.value, ext_fields=ext, body=body)
    return cmd.response(code, status.value, ext_fields=ext)


def _read(st: BrokerState, header: PullMessageRequestHeader,
          filt: MessageFilter | None) -> GetMessageResult:
    return st.store.get_message(header.consumer_group, header.topic, header.queue_id,
                                header.queue_offset, header.max_msg_nums, filt)


@router.handles(RequestCode.PULL_MESSAGE)
def pull_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    header = from_ext(PullMessageRequestHeader, cmd.ext_fields)
    try:
        group, filt = _check(st, header, ctx.connection.remote_addr)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    result = _read(st, header, filt)
    if header.sys_flag & FLAG_COMMIT_OFFSET and not st.is_slave:
        st.offsets.commit(header.consumer_group, header.topic, header.queue_id,
                          header.commit_offset)
    response = _answer(st, cmd, header, group, result)
    if response.code != ResponseCode.PULL_NOT_FOUND or not header.sys_flag & FLAG_SUSPEND:
        return response
    timeout_ms = (header.suspend_timeout_millis if st.config.long_polling_enable
                  else st.config.short_polling_time_mills)
    return _hold(st, cmd, header, group, filt, timeout_ms)


async def _hold(st: BrokerState, cmd: RemotingCommand, header: PullMessageRequestHeader,
                group: SubscriptionGroupConfig, filt: MessageFilter | None,
                timeout_ms: int) -> RemotingCommand:
    """Answer once the queue grows past the requested offset, or at the timeout."""
    arrival = st.store.wait_for_arrival(header.topic, header.queue_id, header.queue_offset)
    try:
        await asyncio.wait_for(arrival, max(timeout_ms, 0) / 1000)
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # Only the waiter was cancelled (the store is shutting down): answer what there is.
    return _answer(st, cmd, header, group, _read(st, header, filt))
