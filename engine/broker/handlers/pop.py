"""POP_MESSAGE (200050), PEEK_MESSAGE (200052), NOTIFICATION (200054), POLLING_INFO (200055).

How this works: each request is checked as 5.3 checks it (broker readable, at most 32 messages,
topic known and readable, queue id in range, group known and allowed to consume), then served
by the broker's `Popper` (`engine.broker.pop.popper`).  A POP or NOTIFICATION that finds
nothing is held (`PopPolling`) until a message arrives in a topic it reads, or its poll time
is over (50 ms before, as 5.3.3's `PopRequest.isTimeout`), and then runs again; the answer
to a pop that found nothing in time is POLLING_TIMEOUT (POLLING_FULL when too many requests
are held), a NOTIFICATION's is SUCCESS with hasMsg false (pollingFull when too many are
held).  A request whose poll would already
have ended more than 500 ms ago when it arrives is answered POLLING_TIMEOUT at once, as 5.3
does.  POP is served by the master: a slave refuses it (see docs/pop.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

from engine.broker.errors import Refused
from engine.broker.filters import message_filter as subscription_filter
from engine.broker.pop.names import MAX_POP_NUMS
from engine.broker.pop.popper import PopBatch, PopRequest
from engine.broker.state import BrokerState
from engine.protocol import receipt
from engine.protocol.body.heartbeat import ExpressionType, SubscriptionData
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from engine.protocol.perm import is_readable
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router
from engine.store.message_filter import MessageFilter

router = Router()

Ctx = RequestContext[BrokerState]

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
BORN_TIME = "bornTime"
#: 5.3 `PopMessageRequestHeader.isTimeoutTooMuch`
TOO_LATE_MS = 500
#: 5.3.3 `PopRequest.isTimeout`: a held request is answered this much before its poll ends.
ANSWER_EARLY_MS = 50
NO_MESSAGE_REMARK = "NO_MESSAGE_IN_QUEUE"


def with_born_time(ext: Mapping[str, str] | None, now: int) -> dict[str, str]:
    """The request's fields with bornTime filled in when absent or 0 (as 5.3 does)."""
    fields = dict(ext or {})
    if fields.get(BORN_TIME) in (None, "", "0"):
        fields[BORN_TIME] = str(now)
    return fields


def check_queue(st: BrokerState, group: str, topic: str, queue_id: int, peer: str,
                verb: str = "peeking") -> TopicConfig:
    """5.3's checks shared by POP, PEEK, NOTIFICATION and POLLING_INFO.

    Raises:
        Refused: the broker, topic or group does not allow it.
    """
    ip = st.config.broker_ip1
    if not st.readable:
        raise Refused(ResponseCode.NO_PERMISSION, f"the broker[{ip}] {verb} message is forbidden")
    if st.is_slave:
        raise Refused(ResponseCode.NO_PERMISSION,
                      f"the broker[{ip}] is a slave: POP is served by the master of "
                      f"{st.config.broker_name} ({st.master_addr or 'unknown'})")
    config = st.topics.get(topic)
    if config is None:
        raise Refused(ResponseCode.TOPIC_NOT_EXIST,
                      f"topic[{topic}] not exist, apply first please!{FAQ}")
    if not is_readable(config.perm):
        raise Refused(ResponseCode.NO_PERMISSION,
                      f"the topic[{topic}] peeking message is forbidden")
    if queue_id >= config.read_queue_nums:
        raise Refused(ResponseCode.INVALID_PARAMETER,
                      f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                      f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{peer}]")
    sub = st.groups.find_or_create(group)
    if sub is None:
        raise Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                      f"subscription group [{group}] does not exist{FAQ}")
    if not sub.consume_enable:
        raise Refused(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    st.pop.ensure_loaded()
    return config


def pop_filter(st: BrokerState, header: PopMessageRequestHeader) -> MessageFilter | None:
    """The tag or SQL92 filter of `exp` / `expType` (none: every message).  SQL92 is served
    whatever enablePropertyFilter says, as 5.3.3's POP compiles and evaluates it on its own
    (the key gates SQL92 for pulls and subscriptions only).

    Raises:
        Refused: SUBSCRIPTION_PARSE_FAILED, as 5.3 answers any expression it cannot use.
    """
    if not header.exp:
        return None
    try:
        expr = ExpressionType[(header.exp_type or "TAG").upper()]
        sub = SubscriptionData.build(header.topic, header.exp, expr)
        return subscription_filter(sub, enable_property_filter=True)
    except (KeyError, ValueError, Refused):
        raise Refused(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                      "parse the consumer's subscription failed") from None


def durable(st: BrokerState, mark: int, response: RemotingCommand
            ) -> RemotingCommand | Awaitable[RemotingCommand]:
    """`response`, once the revive records the request wrote are on disk (SYNC_FLUSH)."""
    waiting = st.pop.flushed_since(mark)
    return response if waiting is None else _after(waiting, response)


async def _after(waiting: Awaitable[object], response: RemotingCommand) -> RemotingCommand:
    await waiting
    return response


# ---------------------------------------------------------------------------- POP_MESSAGE


def _answer(st: BrokerState, cmd: RemotingCommand, req: PopRequest, batch: PopBatch,
            code: int) -> RemotingCommand:
    header = PopMessageResponseHeader(
        batch.pop_time, req.invisible_time, batch.revive_qid, batch.rest_num,
        receipt.join_entries(batch.start_offset_info),
        receipt.join_entries(batch.msg_offset_info),
        receipt.join_entries(batch.order_count_info) if req.order else None)
    if code != ResponseCode.SUCCESS:
        return cmd.response(code, NO_MESSAGE_REMARK, ext_fields=to_ext(header))
    for topic, _, count, size in batch.popped:
        st.stats.on_get(req.group, topic, count, size)
    st.stats.on_pull(True)
    return cmd.response(code, "FOUND", ext_fields=to_ext(header), body=b"".join(batch.messages))


def _watched(st: BrokerState, req: PopRequest) -> list[str]:
    """The topics whose new messages wake a held pop: its topic and its V2 POP retry topic.
    Not the V1 one (the default): 5.3.3 notifies a message of ``%RETRY%G_T`` under that name,
    which no held pop is registered under, so a revived message waits for the next pop."""
    watched = [req.topic]
    if not req.order:
        watched.append(receipt.pop_retry_topic(req.topic, req.group, v2=True))
    return watched


@router.handles(RequestCode.POP_MESSAGE)
def pop_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    now = st.clock()
    header = from_ext(PopMessageRequestHeader, with_born_time(cmd.ext_fields, now))
    if now - header.born_time - header.poll_time > TOO_LATE_MS:
        return cmd.response(ResponseCode.POLLING_TIMEOUT,
                            f"the broker[{st.config.broker_ip1}] pop message is timeout too much")
    try:
        if not st.readable:
            raise Refused(ResponseCode.NO_PERMISSION,
                          f"the broker[{st.config.broker_ip1}] pop message is forbidden")
        if header.max_msg_nums > MAX_POP_NUMS:
            raise Refused(ResponseCode.INVALID_PARAMETER,
                          f"the broker[{st.config.broker_ip1}] pop message's num is greater "
                          f"than {MAX_POP_NUMS}")
        check_queue(st, header.consumer_group, header.topic, header.queue_id,
                    ctx.connection.remote_addr)
        filt = pop_filter(st, header)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    # 0 messages asked: nothing is popped and the request polls its time out, as in 5.3.3
    req = PopRequest(header.consumer_group, header.topic, header.queue_id,
                     max(header.max_msg_nums, 0), header.invisible_time, header.init_mode,
                     header.order, header.attempt_id, filt)
    mark = st.pop.log.appended
    batch = st.pop.popper.pop(req)
    if batch.messages:
        return durable(st, mark, _answer(st, cmd, req, batch, ResponseCode.SUCCESS))
    expires = header.born_time + header.poll_time - ANSWER_EARLY_MS
    if header.poll_time <= 0 or expires <= now:
        return _answer(st, cmd, req, batch, ResponseCode.POLLING_TIMEOUT)
    if st.pop.polling.full(req.topic, req.group, req.queue_id):
        return _answer(st, cmd, req, batch, ResponseCode.POLLING_FULL)
    return _hold(st, cmd, req, expires)


async def _hold(st: BrokerState, cmd: RemotingCommand, req: PopRequest,
                expires: int) -> RemotingCommand:
    """Pop again each time a message may have arrived, until one is popped or time is up."""
    polling = st.pop.polling
    while True:
        deadline = expires
        if req.order:  # a held FIFO queue frees itself when its invisible time runs out
            free_at = st.pop.order.unblocked_at(req.topic, req.group)
            if free_at is not None:
                deadline = min(deadline, free_at + 1)
        await polling.wait(req.topic, req.group, req.queue_id, _watched(st, req),
                           deadline - st.clock())
        mark = st.pop.log.appended
        batch = st.pop.popper.pop(req)
        if batch.messages:
            answer = durable(st, mark, _answer(st, cmd, req, batch, ResponseCode.SUCCESS))
            return answer if isinstance(answer, RemotingCommand) else await answer
        if st.clock() >= expires or st.is_slave or polling.closed:
            return _answer(st, cmd, req, batch, ResponseCode.POLLING_TIMEOUT)


# ---------------------------------------------------------------------------- PEEK_MESSAGE


@router.handles(RequestCode.PEEK_MESSAGE)
def peek_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    header = from_ext(PeekMessageRequestHeader, cmd.ext_fields)
    try:
        check_queue(st, header.consumer_group, header.topic, header.queue_id,
                    ctx.connection.remote_addr)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    messages, rest = st.pop.popper.peek(header.consumer_group, header.topic, header.queue_id,
                                        max(header.max_msg_nums, 1))
    ext = to_ext(PopMessageResponseHeader(0, 0, 0, rest))
    if not messages:
        return cmd.response(ResponseCode.PULL_NOT_FOUND, NO_MESSAGE_REMARK, ext_fields=ext)
    st.stats.on_get(header.consumer_group, header.topic, len(messages), 0)
    return cmd.response(ResponseCode.SUCCESS, "FOUND", ext_fields=ext, body=b"".join(messages))


# ---------------------------------------------------------------------------- NOTIFICATION


@router.handles(RequestCode.NOTIFICATION)
def notification(ctx: Ctx, cmd: RemotingCommand
                 ) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    now = st.clock()
    header = from_ext(NotificationRequestHeader, with_born_time(cmd.ext_fields, now))
    try:
        check_queue(st, header.consumer_group, header.topic, header.queue_id,
                    ctx.connection.remote_addr)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    if _has_message(st, header):
        return _notified(cmd, True)
    expires = header.born_time + header.poll_time - ANSWER_EARLY_MS
    if header.poll_time <= 0 or expires <= now:
        return _notified(cmd, False)
    if st.pop.polling.full(header.topic, header.consumer_group, header.queue_id):
        return _notified(cmd, False, polling_full=True)
    return _hold_notification(st, cmd, header, expires)


def _has_message(st: BrokerState, header: NotificationRequestHeader) -> bool:
    return st.pop.popper.has_message(header.consumer_group, header.topic, header.queue_id,
                                     header.order, header.attempt_id)


def _notified(cmd: RemotingCommand, has_msg: bool, *, polling_full: bool = False
              ) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS,
                        ext_fields=to_ext(NotificationResponseHeader(has_msg, polling_full)))


async def _hold_notification(st: BrokerState, cmd: RemotingCommand,
                             header: NotificationRequestHeader, expires: int) -> RemotingCommand:
    watched = [header.topic,  # as a pop's (`_watched`)
               receipt.pop_retry_topic(header.topic, header.consumer_group, v2=True)]
    while True:
        deadline = expires
        if header.order:  # a held FIFO queue frees itself when its invisible time runs out
            free_at = st.pop.order.unblocked_at(header.topic, header.consumer_group)
            if free_at is not None:
                deadline = min(deadline, free_at + 1)
        await st.pop.polling.wait(header.topic, header.consumer_group, header.queue_id, watched,
                                  deadline - st.clock())
        if _has_message(st, header):
            return _notified(cmd, True)
        if st.clock() >= expires or st.is_slave or st.pop.polling.closed:
            return _notified(cmd, False)


# ---------------------------------------------------------------------------- POLLING_INFO


@router.handles(RequestCode.POLLING_INFO)
def polling_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    header = from_ext(PollingInfoRequestHeader, cmd.ext_fields)
    try:
        check_queue(st, header.consumer_group, header.topic, header.queue_id,
                    ctx.connection.remote_addr)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    count = st.pop.polling.count(header.topic, header.consumer_group, header.queue_id)
    return cmd.response(ResponseCode.SUCCESS,
                        ext_fields=to_ext(PollingInfoResponseHeader(count)))
