"""`TransactionCheckService`: asks producers about half messages nobody committed or rolled back.

How this works (store-format.md §9.4): progress is kept as consumer offsets of group
CID_RMQ_SYS_TRANS on the half queue and on the op queue, so it survives restarts in
consumerOffset.json like 4.9.7's.  Every `transactionCheckInterval` a round reads the op
records not yet consumed (each names a resolved half-queue offset), then walks the half queue
from its offset:
  * resolved -> skipped;
  * checked `transactionCheckMax` times already, or older than the commit-log retention ->
    discarded into TRANS_CHECK_MAX_TIME_TOPIC with a log line;
  * younger than `transactionTimeOut` (or its CHECK_IMMUNITY_TIME_IN_SECONDS) -> the round
    ends there, since everything after it is younger still;
  * otherwise -> re-appended with TRANSACTION_CHECK_TIMES + 1, and CHECK_TRANSACTION_STATE
    about the new copy goes (oneway) to one live producer of its group, whose
    END_TRANSACTION then names the new copy.
The half offset advances past everything handled; the op offset past the op records whose
half offsets are behind it.  Messages stored after the round began wait for the next round.
"""

from __future__ import annotations

import logging

from engine.broker.state import BrokerState
from engine.broker.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from engine.broker.transaction import HALF_QUEUE_ID
from engine.common.service import Service
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import CheckTransactionStateRequestHeader
from engine.protocol.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageRecord,
    create_offset_msg_id,
    decode_record,
    encode_record,
    message_from_record,
    properties_to_string,
)
from engine.protocol.perm import PERM_RW
from engine.protocol.wire import to_ext
from engine.store.results import PutMessageStatus

log = logging.getLogger(__name__)

CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # TransactionalMessageUtil.buildConsumerGroup()
HOUR_MS = 3_600_000


class TransactionCheckService(Service):
    name = "transaction-check"

    def __init__(self, st: BrokerState) -> None:
        super().__init__(st.config.transaction_check_interval / 1000)
        self.st = st

    async def run_once(self) -> None:
        self.interval = self.st.config.transaction_check_interval / 1000
        if not self.st.is_slave:
            self.check()

    # ------------------------------------------------------------------ one round
    def check(self) -> int:
        """One round over the half queue; returns how many checks were sent."""
        st = self.st
        store = st.store
        half_max = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        half_offset = self._offset(TRANS_HALF_TOPIC)
        if half_offset >= half_max:
            return 0
        op_records = self._op_records()
        resolved = {half for _, half in op_records}
        round_start = st.clock()
        sent = 0
        while half_offset < half_max:
            record = None if half_offset in resolved else self._read(TRANS_HALF_TOPIC, half_offset)
            if record is None:  # resolved, or its commit-log file is gone
                half_offset += 1
                continue
            if record.store_timestamp >= round_start:
                break
            props = record.properties()
            checks = int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0") or 0)
            age = round_start - record.store_timestamp
            if (checks >= st.config.transaction_check_max
                    or age > st.store_config.file_reserved_time * HOUR_MS):
                self._discard(record, checks)
                half_offset += 1
                continue
            if age < self._immunity_ms(props):
                break
            if not self._renew_and_ask(record, props, checks + 1):
                break
            sent += 1
            half_offset += 1
        self._advance(half_offset, op_records)
        return sent

    def _offset(self, topic: str) -> int:
        stored = self.st.offsets.query(CHECK_GROUP, topic, HALF_QUEUE_ID)
        return max(stored, self.st.store.get_min_offset_in_queue(topic, HALF_QUEUE_ID))

    def _read(self, topic: str, offset: int) -> MessageRecord | None:
        entry = self.st.store.get_queue_entry(topic, HALF_QUEUE_ID, offset)
        data = self.st.store.look_message_by_offset(entry[0], entry[1]) if entry else None
        if data is None:
            return None
        try:
            return decode_record(data)
        except ProtocolError as exc:
            log.error("%s offset %d unreadable: %s", topic, offset, exc)
            return None

    def _op_records(self) -> list[tuple[int, int]]:
        """(op offset, resolved half offset) of every op record not yet consumed."""
        out: list[tuple[int, int]] = []
        op_max = self.st.store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        for offset in range(self._offset(TRANS_OP_HALF_TOPIC), op_max):
            record = self._read(TRANS_OP_HALF_TOPIC, offset)
            body = record.body.decode(errors="replace").strip() if record else ""
            if body.isdigit():
                out.append((offset, int(body)))
            else:
                log.warning("op record %d is not a half-queue offset (%r); skipped", offset, body)
                out.append((offset, -1))
        return out

    def _immunity_ms(self, props: dict[str, str]) -> int:
        timeout: int = self.st.config.transaction_time_out
        text = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if text and text.isdigit():
            return max(int(text) * 1000, timeout)
        return timeout

    def _discard(self, record: MessageRecord, checks: int) -> None:
        st = self.st
        st.topics.create_if_absent(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_RW)
        msg = message_from_record(record, topic=TRANS_CHECK_MAX_TIME_TOPIC, queue_id=0,
                                  properties=properties_to_string(record.properties()))
        result = st.store.append_message(msg)
        log.warning("half message %s of group %s (offset %d) discarded after %d checks: no "
                    "commit or rollback; kept in %s (%s)",
                    record.msg_id, record.properties().get(PROPERTY_PRODUCER_GROUP),
                    record.queue_offset, checks, TRANS_CHECK_MAX_TIME_TOPIC, result.status)

    def _renew_and_ask(self, record: MessageRecord, props: dict[str, str], checks: int) -> bool:
        """Re-append the half message with one more check, then ask its producer group."""
        st = self.st
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(checks)
        result = st.store.append_message(
            message_from_record(record, topic=TRANS_HALF_TOPIC, queue_id=HALF_QUEUE_ID,
                                properties=properties_to_string(props)))
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("half message %d not renewed (%s); checking again next round",
                      record.queue_offset, result.status)
            return False
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        channel = st.producers.any_live(group)
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if channel is None:
            log.warning("transaction %s: no live producer of group %s to ask (check %d of %d)",
                        uniq, group, checks, st.config.transaction_check_max)
            return True
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=result.queue_offset, commit_log_offset=result.wrote_offset,
            msg_id=uniq, transaction_id=uniq,
            offset_msg_id=create_offset_msg_id(st.store_host, result.wrote_offset))
        body = encode_record(
            topic=props.get(PROPERTY_REAL_TOPIC, record.topic), body=record.body,
            properties=properties_to_string(props),
            queue_id=int(props.get(PROPERTY_REAL_QUEUE_ID, "0") or 0), flag=record.flag,
            queue_offset=result.queue_offset, physical_offset=result.wrote_offset,
            sysflag=record.sysflag, born_timestamp=record.born_timestamp,
            born_host=record.born_host, store_timestamp=result.store_timestamp,
            store_host=record.store_host, reconsume_times=record.reconsume_times)
        channel.conn.send_oneway(
            request(RequestCode.CHECK_TRANSACTION_STATE, to_ext(header), body))
        return True

    def _advance(self, half_offset: int, op_records: list[tuple[int, int]]) -> None:
        offsets = self.st.offsets
        offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, half_offset)
        op_offset = self._offset(TRANS_OP_HALF_TOPIC)
        for offset, half in op_records:
            if half >= half_offset:
                break
            op_offset = offset + 1
        offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, op_offset)

