"""Transactions end to end: committed, rolled back, and resolved by the broker's check-back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import LocalTransactionState, SendStatus
from engine.client.produce.transaction import TransactionProducer
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import EndTransactionRequestHeader
from engine.protocol.message import decode_offset_msg_id
from tests.clock import ManualClock

from .conftest import BrokerFactory, make_topic

TOPIC = "TxTopic"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOWN = LocalTransactionState.UNKNOW


@dataclass
class Listener:
    """Decides by body; `checked` receives what the broker asked about."""

    local: dict[bytes, LocalTransactionState] = field(default_factory=dict)
    on_check: LocalTransactionState = COMMIT
    checked: asyncio.Queue[MessageExt] = field(default_factory=asyncio.Queue)
    executed: list[Message] = field(default_factory=list)

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.executed.append(msg)
        state = self.local.get(msg.body, UNKNOWN)
        if arg == "raise":
            raise RuntimeError("the local transaction broke")
        return state

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        await self.checked.put(msg)
        return self.on_check


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def broker(start_broker: BrokerFactory, clock: ManualClock) -> BrokerController:
    broker = await start_broker(clock=clock)
    await make_topic(broker, TOPIC, queues=1)
    return broker


@pytest.fixture
async def tx(broker: BrokerController, client_config: ClientConfig,
             track: Callable[[Any], Any]) -> tuple[TransactionProducer, Listener]:
    listener = Listener()
    producer: TransactionProducer = track(TransactionProducer("TxPG", listener, client_config))
    await producer.start()
    return producer, listener


async def visible(producer: TransactionProducer, broker: BrokerController) -> int:
    """Messages in the topic, asked on the producer's own connection (after its oneways)."""
    return await producer.instance.api.max_offset(broker.addr, TOPIC, 0)


async def test_commit_makes_the_message_visible(broker: BrokerController,
                                                tx: tuple[TransactionProducer, Listener],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    producer, listener = tx
    listener.local[b"pay"] = COMMIT
    ends: list[EndTransactionRequestHeader] = []
    original = producer.instance.api.end_transaction_oneway

    async def record(addr: str, header: EndTransactionRequestHeader,
                     remark: str | None = None) -> None:
        ends.append(header)
        await original(addr, header, remark)

    monkeypatch.setattr(producer.instance.api, "end_transaction_oneway", record)
    result = await producer.send_in_transaction(Message(TOPIC, b"pay", keys="order-1"))
    assert result.local_transaction_state is COMMIT
    assert result.send_result.status is SendStatus.SEND_OK
    assert result.transaction_id == result.send_result.msg_id
    assert listener.executed[0].transaction_id == result.transaction_id
    assert await visible(producer, broker) == 1
    (end,) = ends
    assert end.producer_group == "TxPG" and end.commit_or_rollback == 8
    assert end.tran_state_table_offset == result.send_result.queue_offset
    assert end.commit_log_offset == decode_offset_msg_id(result.send_result.offset_msg_id)[1]
    assert end.msg_id == result.send_result.msg_id and end.from_transaction_check is False


async def test_rollback_and_a_failing_local_transaction(
        broker: BrokerController, tx: tuple[TransactionProducer, Listener]) -> None:
    producer, listener = tx
    listener.local[b"cancel"] = ROLLBACK
    result = await producer.send_in_transaction(Message(TOPIC, b"cancel"))
    assert result.local_transaction_state is ROLLBACK
    broken = await producer.send_in_transaction(Message(TOPIC, b"x"), "raise")
    assert broken.local_transaction_state is UNKNOWN
    assert await visible(producer, broker) == 0


async def test_unknown_outcomes_are_resolved_by_check_back(
        broker: BrokerController, clock: ManualClock,
        tx: tuple[TransactionProducer, Listener], monkeypatch: pytest.MonkeyPatch) -> None:
    producer, listener = tx
    result = await producer.send_in_transaction(Message(TOPIC, b"maybe", tags="Tx"))
    assert result.local_transaction_state is UNKNOWN
    assert await visible(producer, broker) == 0
    await producer.instance.heartbeat_all()  # the broker asks a live producer of the group
    conn = await producer.instance.remoting.connection(broker.addr)
    answers: list[RemotingCommand] = []
    send_oneway = conn.send_oneway

    def record(cmd: RemotingCommand) -> None:
        answers.append(cmd)
        send_oneway(cmd)

    monkeypatch.setattr(conn, "send_oneway", record)
    clock.advance(broker.state.config.transaction_time_out + 1)
    assert broker.transaction_check.check() == 1
    asked = await asyncio.wait_for(listener.checked.get(), 10)
    assert asked.body == b"maybe" and asked.topic == TOPIC and asked.tags == "Tx"
    assert asked.transaction_id == result.transaction_id
    # the END_TRANSACTION went out in the same step the listener returned in
    (answer,) = [a for a in answers if a.code == RequestCode.END_TRANSACTION]
    ext = answer.ext_fields or {}
    assert ext["fromTransactionCheck"] == "true" and ext["commitOrRollback"] == "8"
    assert ext["producerGroup"] == "TxPG" and ext["msgId"] == result.transaction_id
    assert ext["transactionId"] == result.transaction_id
    assert await visible(producer, broker) == 1
    clock.advance(broker.state.config.transaction_time_out + 1)
    assert broker.transaction_check.check() == 0  # resolved: nothing left to ask about
