"""`TransactionProducer`: half messages, the local transaction, and the broker's check-backs.

How this works (client-behaviour.md §2.5): `send_in_transaction` sends the message as a half
message (properties TRAN_MSG=true, PGROUP=<group>, sysflag PREPARED) with a sync send; when
it is stored, the listener's `execute_local_transaction` decides, and END_TRANSACTION goes
oneway to the same broker: commit (8), rollback (12) or unknown (0), naming the half message
by its commit-log offset (from the offset message id), queue offset and `UNIQ_KEY`.  A half
message stored with a flush/slave timeout is rolled back without asking the listener.
Unknown outcomes are resolved later by the broker, which sends CHECK_TRANSACTION_STATE with
the half message; `check_local_transaction` answers and END_TRANSACTION (fromTransactionCheck
true, offsets and transactionId copied from the check) goes back on the same connection.
Listener methods may be plain functions or coroutines; one that raises counts as unknown.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Protocol

from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientError, MessageValidationError
from engine.client.core.ids import uniq_ids
from engine.client.core.instance import ClientInstance
from engine.client.core.message import Message, MessageExt
from engine.client.core.pull_codec import message_ext
from engine.client.core.results import LocalTransactionState, SendStatus, TransactionSendResult
from engine.client.produce.producer import Producer, ProducerOptions
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from engine.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_offset_msg_id,
    decode_record,
)
from engine.protocol.signature import sign
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.connection import Connection

log = logging.getLogger(__name__)


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        """Run the local transaction; return a `LocalTransactionState` (or await to one)."""

    def check_local_transaction(self, msg: MessageExt) -> Any:
        """The outcome of an earlier local transaction, asked by the broker."""


async def _decide(outcome: Any) -> LocalTransactionState:
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome if isinstance(outcome, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    def __init__(self, group: str, listener: TransactionListener,
                 config: ClientConfig | None = None, *, options: ProducerOptions | None = None,
                 instance: ClientInstance | None = None) -> None:
        super().__init__(group, config, options=options, instance=instance)
        self.listener = listener

    async def send_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send a half message, run the local transaction, commit or roll back.

        Raises:
            SendFailedError / ServerError: the half message was not stored.
        """
        self._check_running()
        if msg.delay_time_level:
            msg = msg.without_delay()  # Java clears DELAY: half messages cannot be delayed
        if msg.system_properties.get(PROPERTY_TRANSACTION_PREPARED):
            raise MessageValidationError("the message is already a half message")
        half = msg.with_system_properties(**{
            PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: self.group,
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: msg.system_properties.get(
                PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or uniq_ids().next()})
        result = await self.send(half)
        state = LocalTransactionState.UNKNOW
        failure: Exception | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = await _decide(self.listener.execute_local_transaction(half, arg))
            except Exception as exc:
                log.warning("local transaction %s raised: %r", result.msg_id, exc)
                failure = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end(result.message_queue.broker_name, result.offset_msg_id,
                            result.msg_id, result.queue_offset, result.transaction_id, state,
                            failure)
        except ClientError as exc:
            log.warning("local transaction %s is %s but END_TRANSACTION failed: %s; the "
                        "broker will check back", result.msg_id, state.name, exc)
        if self.tracer is not None:
            self.tracer.ended(
                topic=half.topic, tags=half.tags, keys=" ".join(half.keys) or None,
                msg_id=result.msg_id, transaction_id=result.transaction_id or half.transaction_id,
                state=state.name, region_id=None, from_check=False,
                broker_addr=self.instance.master_addr(result.message_queue.broker_name) or "")
        return TransactionSendResult(result, state, half.transaction_id)

    async def _end(self, broker_name: str, offset_msg_id: str, msg_id: str, queue_offset: int,
                   transaction_id: str | None, state: LocalTransactionState,
                   failure: Exception | None) -> None:
        try:
            _, commit_log_offset = decode_offset_msg_id(offset_msg_id)
        except ProtocolError:
            _, commit_log_offset = decode_offset_msg_id(msg_id)
        addr = await self._addr_of(broker_name, offset_msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=state.value, msg_id=msg_id,
            from_transaction_check=False, transaction_id=transaction_id)
        remark = (f"executeLocalTransactionBranch exception: {failure!r}"
                  if failure is not None else None)
        await self.instance.api.end_transaction_oneway(addr, header, remark)

    async def _addr_of(self, broker_name: str, offset_msg_id: str) -> str:
        addr = self.instance.master_addr(broker_name)
        if addr is not None:
            return addr
        (ip, port), _ = decode_offset_msg_id(offset_msg_id)
        return f"{ip}:{port}"

    async def check_transaction_state(self, conn: Connection, cmd: RemotingCommand) -> None:
        try:
            header = from_ext(CheckTransactionStateRequestHeader, cmd.ext_fields)
            msg = message_ext(decode_record(cmd.body or b""), cmd.ext("bname") or "")
        except ProtocolError as exc:
            log.warning("CHECK_TRANSACTION_STATE from %s does not decode: %s",
                        conn.remote_addr, exc)
            return
        failure: Exception | None = None
        try:
            state = await _decide(self.listener.check_local_transaction(msg))
        except Exception as exc:
            log.warning("transaction check of %s raised: %r", header.transaction_id, exc)
            state, failure = LocalTransactionState.UNKNOW, exc
        end = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=state.value,
            msg_id=msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
            from_transaction_check=True, transaction_id=header.transaction_id,
            bname=cmd.ext("bname"))
        remark = (f"checkLocalTransactionState Exception: {failure!r}"
                  if failure is not None else None)
        answer = RemotingCommand(code=RequestCode.END_TRANSACTION, remark=remark,
                                 ext_fields=to_ext(end))
        if conn.closed:
            log.warning("connection to %s closed before the check of %s was answered",
                        conn.remote_addr, header.transaction_id)
            return
        if self.tracer is not None:
            self.tracer.ended(
                topic=msg.topic, tags=msg.tags, keys=" ".join(msg.keys) or None,
                msg_id=end.msg_id, transaction_id=header.transaction_id, state=state.name,
                broker_addr=str(conn.remote_addr), from_check=True,
                region_id=msg.properties.get("MSG_REGION"))
        credentials = self.instance.config.credentials
        conn.send_oneway(answer if credentials is None else sign(answer, credentials))
