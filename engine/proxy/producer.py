"""SendMessage, EndTransaction and RecallMessage (5.3 `SendMessageActivity`,
`EndTransactionActivity`, `RecallMessageActivity`).

How this works: the messages of one request share a topic; each is checked and converted
(`messages.to_remoting`), the first one's type is checked against the topic's `message.type`
(enableTopicMessageTypeCheck, not for retry and DLQ topics), and all go to one write queue:
the message group's (a single message with a group) or the topic's next in turn.  One
message goes as SEND_MESSAGE_V2, several as one SEND_BATCH_MESSAGE (as 5.3); each message is
answered with its own entry, and the response's status is the entries' common code, or
MULTIPLE_RESULTS.  A stored half message is recorded for its
EndTransaction, which then goes oneway to the broker that holds it (or, for an orphaned
transaction check, back on the connection the check came on).  A timer message's entry
carries the recall handle its broker answered; RecallMessage sends that handle back as
RECALL_MESSAGE to the broker it names (`engine.protocol.recall`).
"""

from __future__ import annotations

import dataclasses
import time

from engine.protocol.attributes import TopicMessageType
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request as request_cmd
from engine.protocol.header.broker import EndTransactionRequestHeader
from engine.protocol.message import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    RETRY_GROUP_TOPIC_PREFIX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from engine.protocol.recall import RecallHandleError, decode_handle
from engine.protocol.signature import sign
from engine.protocol.wire import to_ext
from engine.proxy.brokers import Sent
from engine.proxy.caller import CallContext
from engine.proxy.core import ProxyCore
from engine.proxy.messages import check_message_type, message_type, to_remoting
from engine.proxy.route import queue_for_group
from engine.proxy.status import OK_STATUS, ProxyError, status
from engine.proxy.transactions import HalfMessage, commit_log_offset
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.validate import validate_topic

_SEND_CODES: dict[int, int] = {ResponseCode.SUCCESS: pb.OK,
               ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
               ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
               ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE}


def _entry(sent: Sent, message_id: str) -> spb.SendResultEntry:
    code = _SEND_CODES.get(sent.status, pb.INTERNAL_SERVER_ERROR)
    if code != pb.OK:
        return spb.SendResultEntry(status=status(code, f"send message failed, sendStatus="
                                                       f"{ResponseCode(sent.status).name}"))
    return spb.SendResultEntry(status=OK_STATUS, offset=sent.queue_offset,
                               message_id=message_id,
                               transaction_id=sent.transaction_id or "",
                               recall_handle=sent.recall_handle)


async def send_message(core: ProxyCore, ctx: CallContext,
                       request: spb.SendMessageRequest) -> spb.SendMessageResponse:
    """Raises ProxyError: a check failed, or the broker refused or could not be reached."""
    if not request.messages:
        raise ProxyError(pb.MESSAGE_CORRUPTED, "no message to send")
    first = request.messages[0].topic
    topic = validate_topic(first)
    now = int(time.time() * 1000)
    host = ctx.remote_addr  # 5.3.3's context address: host and port
    out = []
    for msg in request.messages:
        if msg.topic != first:  # 5.3.3 compares the resources (namespace too)
            raise ProxyError(pb.MESSAGE_CORRUPTED, "topic in message is not same")
        out.append(to_remoting(msg, born_host=host, config=core.config, now_ms=now))
    gateway = core.gateway
    if core.config.enable_topic_message_type_check and not (
            topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)):
        check_message_type(await gateway.topic_message_type(topic), message_type(out[0].properties))
    queues = await gateway.write_queues(topic)
    if not queues:
        raise ProxyError(pb.FORBIDDEN, "no writable queue")
    group = out[0].message_group if len(out) == 1 else ""
    queue = (queue_for_group(queues, group) if group
             else queues[core.next_turn(topic) % len(queues)])
    entries: list[spb.SendResultEntry] = []
    for msg, sent in zip(out, await gateway.send(queue, out), strict=True):
        entry = _entry(sent, msg.message_id)
        if msg.sys_flag & TRANSACTION_PREPARED_TYPE and sent.status == ResponseCode.SUCCESS:
            transaction_id = sent.transaction_id or msg.message_id
            entry.transaction_id = transaction_id
            recovery = int(msg.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, "0") or 0)
            core.transactions.add(HalfMessage(
                producer_group=topic, transaction_id=transaction_id, msg_id=msg.message_id,
                broker_name=sent.broker_name, broker_addr=sent.broker_addr,
                tran_state_table_offset=sent.queue_offset,
                commit_log_offset=commit_log_offset(sent.offset_msg_id),
                expires_at=core.transactions.deadline(recovery)))
        entries.append(entry)
    codes = {e.status.code for e in entries}
    code = codes.pop() if len(codes) == 1 else pb.MULTIPLE_RESULTS
    return spb.SendMessageResponse(status=status(code), entries=entries)


async def recall_message(core: ProxyCore, ctx: CallContext,
                         request: spb.RecallMessageRequest) -> spb.RecallMessageResponse:
    """5.3.3 `RecallMessageActivity` / `ProducerProcessor.recallMessage`.

    Raises:
        ProxyError: ILLEGAL_TOPIC, MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (a topic that is not
            DELAY), INTERNAL_SERVER_ERROR (a bad handle, or the broker's refusal).
    """
    topic = validate_topic(request.topic)
    if core.config.enable_topic_message_type_check:
        check_message_type(await core.gateway.topic_message_type(topic), TopicMessageType.DELAY)
    try:
        handle = decode_handle(request.recall_handle)
    except RecallHandleError as exc:
        raise ProxyError(pb.INTERNAL_SERVER_ERROR, str(exc)) from None
    message_id = await core.gateway.recall(topic, handle.broker_name, request.recall_handle,
                                           ctx.language_code)
    return spb.RecallMessageResponse(status=OK_STATUS, message_id=message_id)


async def end_transaction(core: ProxyCore, ctx: CallContext,
                          request: spb.EndTransactionRequest) -> spb.EndTransactionResponse:
    """Raises ProxyError: unknown transaction (INVALID_TRANSACTION_ID), bad resolution."""
    topic = request.topic.name
    if request.resolution == pb.COMMIT:
        resolution = TRANSACTION_COMMIT_TYPE
    elif request.resolution == pb.ROLLBACK:
        resolution = TRANSACTION_ROLLBACK_TYPE
    else:
        raise ProxyError(pb.BAD_REQUEST, "transaction resolution must be COMMIT or ROLLBACK")
    half = core.transactions.pop(topic, request.transaction_id)
    if half is None:
        raise ProxyError(pb.INVALID_TRANSACTION_ID,
                         f"cannot find transaction data, transactionId: {request.transaction_id}")
    from_check = request.source == pb.SOURCE_SERVER_CHECK or half.check_conn is not None
    header = EndTransactionRequestHeader(
        producer_group=half.producer_group, tran_state_table_offset=half.tran_state_table_offset,
        commit_log_offset=half.commit_log_offset, commit_or_rollback=resolution,
        msg_id=request.message_id or half.msg_id, from_transaction_check=from_check,
        transaction_id=half.transaction_id, bname=half.broker_name or None)
    cmd = dataclasses.replace(request_cmd(RequestCode.END_TRANSACTION, to_ext(header),
                                          oneway=True), language=ctx.language_code)
    if half.check_conn is not None:
        if not half.check_conn.closed:
            creds = core.gateway.credentials
            half.check_conn.send_oneway(cmd if creds is None else sign(cmd, creds))
    else:
        await core.gateway.oneway(half.broker_addr, cmd, "end transaction")
    return spb.EndTransactionResponse(status=OK_STATUS)
