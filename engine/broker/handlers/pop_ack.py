"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151), CHANGE_MESSAGE_INVISIBLETIME (200053).

How this works: the request names the topic the message was popped from (a client turns the
receipt's retry mark back into the retry topic's name) and the message's queue offset; the
receipt (`extraInfo`) names the checkpoint.  Checks and answers are 5.3's: an unknown topic is
TOPIC_NOT_EXIST, a queue id out of range MESSAGE_ILLEGAL, an offset outside the queue
NO_MESSAGE; an ack of a receipt that has expired (its message revived already) or that no
checkpoint matches is SUCCESS.  The work is `engine.broker.pop.acker`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace

from engine.broker.errors import Refused
from engine.broker.handlers.pop import durable
from engine.broker.pop.records import AckMsg
from engine.broker.state import BrokerState
from engine.protocol import receipt
from engine.protocol.body.decode import request_body
from engine.protocol.body.pop import BatchAckMessageRequestBody
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
)
from engine.protocol.receipt import ExtraInfo
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _check(st: BrokerState, topic: str, queue_id: int, offset: int, peer: str,
           *, end_inclusive: bool) -> None:
    """Raises Refused: 5.3's answers to an unknown topic, queue or offset."""
    if st.is_slave:
        raise Refused(ResponseCode.NO_PERMISSION,
                      f"the broker[{st.config.broker_ip1}] is a slave: POP is served by the "
                      f"master of {st.config.broker_name} ({st.master_addr or 'unknown'})")
    config = st.topics.get(topic)
    if config is None:
        raise Refused(ResponseCode.TOPIC_NOT_EXIST,
                      f"topic[{topic}] not exist, apply first please!{FAQ}")
    if not 0 <= queue_id < config.read_queue_nums:
        raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                      f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                      f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{peer}]")
    low = st.store.get_min_offset_in_queue(topic, queue_id)
    high = st.store.get_max_offset_in_queue(topic, queue_id)
    if offset < low or offset > high or (offset == high and not end_inclusive):
        raise Refused(ResponseCode.NO_MESSAGE,
                      f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, "
                      f"store:{low}~{high}")
    st.pop.ensure_loaded()


@router.handles(RequestCode.ACK_MESSAGE)
def ack_message(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    header = from_ext(AckMessageRequestHeader, cmd.ext_fields)
    try:
        _check(st, header.topic, header.queue_id, header.offset, ctx.connection.remote_addr,
               end_inclusive=True)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    mark = st.pop.log.appended
    return durable(st, mark, _ack(st, cmd, header, ExtraInfo.parse(header.extra_info)))


def _ack(st: BrokerState, cmd: RemotingCommand, header: AckMessageRequestHeader,
         info: ExtraInfo) -> RemotingCommand:
    outcome = st.pop.acker.ack(header.consumer_group, header.topic, header.queue_id,
                               [header.offset], info, info.ck_queue_offset, info.broker_name)
    return cmd.response(outcome.code, outcome.remark)


@router.handles_many(RequestCode.ACK_MESSAGE)
def ack_messages(ctx: Ctx, cmds: list[RemotingCommand]
                 ) -> list[RemotingCommand | Awaitable[RemotingCommand] | Exception]:
    """Acks read together (a 5.x client acks each message, a proxy all of one AckMessage at
    once): checked one by one; the acks of one checkpoint become one record (a batch ack,
    5.3's `BatchAckMsg`, when there are several), all stored with one append; answers in
    order."""
    st = ctx.state
    mark = st.pop.log.appended
    answers: list[RemotingCommand | Awaitable[RemotingCommand] | Exception] = []
    records: list[tuple[AckMsg, int]] = []
    waiting: list[tuple[int, RemotingCommand]] = []
    for cmd in cmds:
        try:
            header = from_ext(AckMessageRequestHeader, cmd.ext_fields)
            _check(st, header.topic, header.queue_id, header.offset, ctx.connection.remote_addr,
                   end_inclusive=True)
            info = ExtraInfo.parse(header.extra_info)
        except Refused as refused:
            answers.append(cmd.response(refused.code, refused.remark))
            continue
        except Exception as exc:  # answered by the dispatcher, as a failed single handler
            answers.append(exc)
            continue
        record = None if info.is_order else st.pop.acker.ack_record(
            header.consumer_group, header.topic, header.queue_id, [header.offset], info,
            info.ck_queue_offset, info.broker_name)
        if record is None:
            answers.append(_ack(st, cmd, header, info))
            continue
        records.append(record)
        waiting.append((len(answers), cmd))
        answers.append(cmd)  # replaced below
    merged, which = _merged(records)
    stored = st.pop.log.append_acks(merged)
    for (i, cmd), k in zip(waiting, which, strict=True):
        outcome = st.pop.acker.outcome(*stored[k])
        answers[i] = durable(st, mark, cmd.response(outcome.code, outcome.remark))
    return answers


def _merged(records: list[tuple[AckMsg, int]]) -> tuple[list[tuple[AckMsg, int]], list[int]]:
    """The records with those of one checkpoint merged into one, and for each record given
    the index of the one it went into."""
    slots: dict[tuple[object, int], int] = {}
    offsets: list[list[int]] = []
    firsts: list[tuple[AckMsg, int]] = []
    which = []
    for ack, qid in records:
        key = (ack.ck_key, qid)
        k = slots.get(key)
        if k is None:
            k = slots[key] = len(firsts)
            firsts.append((ack, qid))
            offsets.append([])
        offsets[k].extend(ack.offsets())
        which.append(k)
    merged = []
    for (ack, qid), acked in zip(firsts, offsets, strict=True):
        unique = tuple(dict.fromkeys(acked))
        if len(unique) > 1:
            ack = replace(ack, ack_offset=-1, ack_offset_list=unique)
        merged.append((ack, qid))
    return merged, which


@router.handles(RequestCode.BATCH_ACK_MESSAGE)
def batch_ack_message(ctx: Ctx, cmd: RemotingCommand
                      ) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    body = request_body(cmd, BatchAckMessageRequestBody) if cmd.body else None
    if body is None or not body.acks:
        return cmd.response(ResponseCode.NO_MESSAGE)
    if st.is_slave:
        return cmd.response(ResponseCode.NO_PERMISSION,
                            f"the broker[{st.config.broker_ip1}] is a slave: POP is served by "
                            f"the master of {st.config.broker_name}")
    st.pop.ensure_loaded()
    mark = st.pop.log.appended
    broker_name = body.broker_name or st.config.broker_name
    for one in body.acks:
        topic = receipt.real_topic(one.topic, one.consumer_group, one.retry)
        low = st.store.get_min_offset_in_queue(topic, one.queue_id)
        high = st.store.get_max_offset_in_queue(topic, one.queue_id)
        offsets = [o for o in one.offsets() if low <= o <= high]
        info = ExtraInfo(one.start_offset, one.pop_time, one.invisible_time,
                         one.revive_queue_id, one.retry, broker_name, one.queue_id)
        outcome = st.pop.acker.ack(one.consumer_group, topic, one.queue_id, offsets, info,
                                   one.start_offset, broker_name)
        if outcome.code != ResponseCode.SUCCESS:
            return cmd.response(outcome.code, outcome.remark)
    return durable(st, mark, cmd.response(ResponseCode.SUCCESS))


@router.handles(RequestCode.CHANGE_MESSAGE_INVISIBLETIME)
def change_invisible_time(ctx: Ctx, cmd: RemotingCommand
                          ) -> RemotingCommand | Awaitable[RemotingCommand]:
    st = ctx.state
    header = from_ext(ChangeInvisibleTimeRequestHeader, cmd.ext_fields)
    try:
        _check(st, header.topic, header.queue_id, header.offset, ctx.connection.remote_addr,
               end_inclusive=False)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    info = ExtraInfo.parse(header.extra_info)
    mark = st.pop.log.appended
    changed = st.pop.acker.change_invisible_time(header.consumer_group, header.topic,
                                                 header.queue_id, header.offset, info,
                                                 header.invisible_time)
    if changed.code != ResponseCode.SUCCESS:
        return cmd.response(changed.code, changed.remark)
    return durable(st, mark, cmd.response(
        ResponseCode.SUCCESS, ext_fields=to_ext(ChangeInvisibleTimeResponseHeader(
            changed.pop_time, changed.invisible_time, changed.revive_qid))))
