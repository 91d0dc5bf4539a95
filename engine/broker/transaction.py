"""Transactional messages: half messages, commit/rollback, and the op records that close them.

How this works (store-format.md §9.4, message-format.md §10): a producer's half message is
stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with `REAL_TOPIC` / `REAL_QID` and transaction type
NOT, so no consumer sees it.  END_TRANSACTION names the half message by commit-log offset and
half-queue offset; after checking that both and the producer group match, a commit puts the
real message (type COMMIT, `preparedTransactionOffset` = the half message's commit-log
offset) into its real queue, and both commit and rollback write an op record to
RMQ_SYS_TRANS_OP_HALF_TOPIC (tags `d`, body = the half message's queue offset), which tells
the check service (`transaction_check.py`) that the half message is resolved.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.broker.state import BrokerState
from engine.broker.stats import TRANS_COMMIT, TRANS_HALF_PUT, TRANS_ROLLBACK
from engine.broker.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from engine.protocol.codes import ResponseCode
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import EndTransactionRequestHeader
from engine.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    BrokerMessage,
    MessageRecord,
    decode_record,
    message_from_record,
    properties_to_string,
    string_to_properties,
)
from engine.protocol.perm import PERM_RW
from engine.store.results import PutMessageStatus

log = logging.getLogger(__name__)

REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
HALF_QUEUE_ID = 0


def with_tran_type(sysflag: int, tran_type: int) -> int:
    return (sysflag & ~TRANSACTION_TYPE_MASK) | tran_type


def half_message(st: BrokerState, msg: BrokerMessage) -> BrokerMessage:
    """The copy of a producer's prepared message to park in the half topic."""
    st.topics.create_if_absent(TRANS_HALF_TOPIC, 1, PERM_RW)
    props = string_to_properties(msg.properties)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    st.stats.on_transaction(TRANS_HALF_PUT, msg.topic)
    return msg._replace(topic=TRANS_HALF_TOPIC, queue_id=HALF_QUEUE_ID,
                        sysflag=with_tran_type(msg.sysflag, TRANSACTION_NOT_TYPE),
                        properties=properties_to_string(props))


def op_message(st: BrokerState, half_queue_id: int, half_queue_offset: int) -> BrokerMessage:
    """The record that marks a half message resolved (committed or rolled back)."""
    st.topics.create_if_absent(TRANS_OP_HALF_TOPIC, 1, PERM_RW)
    props = {"TAGS": REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "false"}
    return BrokerMessage(
        topic=TRANS_OP_HALF_TOPIC, body=str(half_queue_offset).encode(), queue_id=half_queue_id,
        properties=properties_to_string(props), born_timestamp=st.clock(),
        born_host=st.store_host, store_host=st.store_host)


def real_message(record: MessageRecord) -> BrokerMessage:
    """The committed message: back to its real topic and queue, type COMMIT."""
    props = record.properties()
    topic = props.pop(PROPERTY_REAL_TOPIC)
    queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID))
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return message_from_record(
        record, topic=topic, queue_id=queue_id, properties=properties_to_string(props),
        sysflag=with_tran_type(record.sysflag, TRANSACTION_COMMIT_TYPE),
        prepared_transaction_offset=record.physical_offset)


@dataclass(frozen=True, slots=True)
class EndOutcome:
    code: int
    remark: str | None = None


def find_half(st: BrokerState, header: EndTransactionRequestHeader) -> MessageRecord | str:
    """The half message END_TRANSACTION names, or why it cannot be the one."""
    data = st.store.look_message_by_offset(header.commit_log_offset)
    if data is None:
        return "Find prepared transaction message failed"
    try:
        record = decode_record(data)
    except ProtocolError:
        return "Find prepared transaction message failed"
    props = record.properties()
    if record.topic != TRANS_HALF_TOPIC or PROPERTY_REAL_TOPIC not in props:
        return "Find prepared transaction message failed"
    if props.get(PROPERTY_PRODUCER_GROUP) != header.producer_group:
        return "The producer group wrong"
    if record.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if record.physical_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return record


def end_transaction(st: BrokerState, header: EndTransactionRequestHeader) -> EndOutcome | None:
    """Commit or roll back a half message; None for an "unknown" answer (nothing to do)."""
    kind = header.commit_or_rollback
    source = "check-back" if header.from_transaction_check else "producer"
    if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        log.info("transaction %s of group %s still unknown (%s answered); will check again",
                 header.msg_id, header.producer_group, source)
        return None
    half = find_half(st, header)
    if isinstance(half, str):
        log.warning("END_TRANSACTION %s from %s (group %s, offset %d): %s", header.msg_id,
                    source, header.producer_group, header.commit_log_offset, half)
        return EndOutcome(ResponseCode.SYSTEM_ERROR, half)
    if kind == TRANSACTION_COMMIT_TYPE:
        msg = real_message(half)
        result = st.store.append_message(msg)
        if result.status is not PutMessageStatus.PUT_OK:
            remark = f"commit of {header.msg_id} failed: {result.status} {result.error_message}"
            log.error("%s; the half message stays and will be checked again", remark)
            if result.status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:  # as 5.x answers
                return EndOutcome(ResponseCode.MESSAGE_ILLEGAL, result.error_message)
            return EndOutcome(ResponseCode.SYSTEM_ERROR, remark)
        st.stats.on_put(msg.topic, 1, len(msg.body))
    op = st.store.append_message(op_message(st, half.queue_id, half.queue_offset))
    if op.status is not PutMessageStatus.PUT_OK:
        log.error("op record for half message %d not written (%s); it will be checked again",
                  half.queue_offset, op.status)
    st.stats.on_transaction(TRANS_COMMIT if kind == TRANSACTION_COMMIT_TYPE else TRANS_ROLLBACK,
                            half.properties().get(PROPERTY_REAL_TOPIC, ""))
    return EndOutcome(ResponseCode.SUCCESS)
