"""Transactional messages through the real protocol: commit, rollback, check-back, discard.

The producer is a `RemotingClient` with a router, as a Java producer's connection is: it
answers the broker's CHECK_TRANSACTION_STATE with END_TRANSACTION on the same connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.broker.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from engine.broker.transaction_check import CHECK_GROUP
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from engine.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    decode_offset_msg_id,
    decode_record,
    decode_records,
)
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from tests.clock import ManualClock

from .conftest import running_broker
from .helpers import heartbeat, pull_request, send_request

TOPIC = "Orders"
PGROUP = "OrderTx"


@dataclass
class Producer:
    """What the producer's check listener decides, and what it was asked."""

    decisions: dict[str, int] = field(default_factory=dict)
    checks: list[tuple[CheckTransactionStateRequestHeader, bytes]] = field(default_factory=list)
    answered: asyncio.Queue[str] = field(default_factory=asyncio.Queue)


checker = Router()


@checker.handles(RequestCode.CHECK_TRANSACTION_STATE)
async def on_check(ctx: RequestContext[Producer], cmd: RemotingCommand) -> None:
    header = from_ext(CheckTransactionStateRequestHeader, cmd.ext_fields)
    ctx.state.checks.append((header, cmd.body or b""))
    tx = header.transaction_id or ""
    end = EndTransactionRequestHeader(
        producer_group=PGROUP, tran_state_table_offset=header.tran_state_table_offset,
        commit_log_offset=header.commit_log_offset,
        commit_or_rollback=ctx.state.decisions.get(tx, 0), msg_id=tx,
        from_transaction_check=True, transaction_id=tx)
    answer = request(RequestCode.END_TRANSACTION, to_ext(end))
    if end.commit_or_rollback:
        await ctx.connection.invoke(answer, 5)
    else:
        ctx.connection.send_oneway(answer)
    await ctx.state.answered.put(tx)


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock,
                              transaction_check_max=2) as controller:
        yield controller


@pytest.fixture
async def producer(broker: BrokerController) -> AsyncIterator[tuple[RemotingClient, Producer]]:
    state = Producer()
    client = RemotingClient(checker, state)
    resp = await client.invoke(broker.addr, heartbeat("tx-producer@1", producer_group=PGROUP))
    assert resp.code == ResponseCode.SUCCESS
    try:
        yield client, state
    finally:
        await client.close()


async def send_half(client: RemotingClient, broker: BrokerController,
                    tx: str) -> EndTransactionRequestHeader:
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, tx.encode(), queue_id=1, keys=f"key-{tx}", group=PGROUP,
        extra={"TRAN_MSG": "true", "PGROUP": PGROUP, "UNIQ_KEY": tx}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ext = resp.ext_fields or {}
    assert ext["queueId"] == "1"
    _, commit_log_offset = decode_offset_msg_id(ext["msgId"])
    return EndTransactionRequestHeader(
        producer_group=PGROUP, tran_state_table_offset=int(ext["queueOffset"]),
        commit_log_offset=commit_log_offset, commit_or_rollback=0, msg_id=tx,
        transaction_id=tx)


async def end(client: RemotingClient, broker: BrokerController,
              header: EndTransactionRequestHeader, kind: int,
              **changes: object) -> RemotingCommand:
    header = replace(header, commit_or_rollback=kind, **changes)  # type: ignore[arg-type]
    return await client.invoke(broker.addr, request(RequestCode.END_TRANSACTION, to_ext(header)))


async def visible(client: RemotingClient, broker: BrokerController) -> list[str]:
    resp = await client.invoke(broker.addr, pull_request(TOPIC, 1, 0))
    if resp.code != ResponseCode.SUCCESS:
        return []
    return [r.body.decode() for r in decode_records(resp.body or b"")]


async def test_commit_rollback_and_check_back(
        broker: BrokerController, producer: tuple[RemotingClient, Producer],
        clock: ManualClock) -> None:
    client, state = producer
    halves = {tx: await send_half(client, broker, tx) for tx in ("tx-1", "tx-2", "tx-3")}
    assert await visible(client, broker) == []  # half messages are invisible
    assert broker.state.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 3

    assert (await end(client, broker, halves["tx-1"], TRANSACTION_COMMIT_TYPE)).code == 0
    assert (await end(client, broker, halves["tx-2"], TRANSACTION_ROLLBACK_TYPE)).code == 0
    assert await visible(client, broker) == ["tx-1"]

    # tx-3 is never ended by the producer: once older than transactionTimeOut it is checked.
    checks = broker.transaction_check
    assert checks.check() == 0  # younger than 6 s: not yet
    clock.advance(6_001)
    state.decisions["tx-3"] = TRANSACTION_COMMIT_TYPE
    assert checks.check() == 1
    assert await asyncio.wait_for(state.answered.get(), 5) == "tx-3"
    [(header, body)] = state.checks
    assert header.msg_id == header.transaction_id == "tx-3"
    asked = decode_record(body)
    assert (asked.topic, asked.queue_id, asked.body) == (TOPIC, 1, b"tx-3")
    assert asked.properties()["TRANSACTION_CHECK_TIMES"] == "1"
    assert await visible(client, broker) == ["tx-1", "tx-3"]

    resp = await client.invoke(broker.addr, pull_request(TOPIC, 1, 0))
    committed = decode_records(resp.body or b"")
    for record in committed:
        props = record.properties()
        assert record.sysflag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
        assert "TRAN_MSG" not in props and "REAL_TOPIC" not in props
        assert props["PGROUP"] == PGROUP and props["KEYS"] == f"key-{record.body.decode()}"
    assert [r.prepared_transaction_offset for r in committed] == [
        halves["tx-1"].commit_log_offset, header.commit_log_offset]  # tx-3: the renewed copy

    # Everything is resolved: later rounds ask nothing and the progress is in the offsets.
    clock.advance(60_000)
    assert checks.check() == 0
    half_max = broker.state.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
    assert broker.state.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0) == half_max


async def test_unresolved_half_message_is_discarded_after_max_checks(
        broker: BrokerController, producer: tuple[RemotingClient, Producer],
        clock: ManualClock) -> None:
    client, state = producer
    await send_half(client, broker, "tx-lost")
    checks = broker.transaction_check
    for _ in (1, 2):  # transactionCheckMax=2; the producer keeps answering "unknown"
        clock.advance(6_001)
        assert checks.check() == 1
        assert await asyncio.wait_for(state.answered.get(), 5) == "tx-lost"
    clock.advance(6_001)
    assert checks.check() == 0
    assert broker.state.store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1
    assert await visible(client, broker) == []
    assert [h.transaction_id for h, _ in state.checks] == ["tx-lost", "tx-lost"]


async def test_end_transaction_checks_what_it_names(
        broker: BrokerController, producer: tuple[RemotingClient, Producer]) -> None:
    client, _ = producer
    half = await send_half(client, broker, "tx-9")
    wrong_group = await end(client, broker, half, TRANSACTION_COMMIT_TYPE, producer_group="Other")
    assert (wrong_group.code, wrong_group.remark) == (ResponseCode.SYSTEM_ERROR,
                                                      "The producer group wrong")
    wrong_offset = await end(client, broker, half, TRANSACTION_COMMIT_TYPE,
                             tran_state_table_offset=7)
    assert wrong_offset.remark == "The transaction state table offset wrong"
    missing = await end(client, broker, half, TRANSACTION_COMMIT_TYPE, commit_log_offset=1 << 40)
    assert missing.remark == "Find prepared transaction message failed"
    assert await visible(client, broker) == []


async def test_transactional_messages_are_neither_batched_nor_delayed(
        broker: BrokerController, client: RemotingClient) -> None:
    props = {"TRAN_MSG": "true", "PGROUP": PGROUP}
    batch = await client.invoke(broker.addr, send_request(TOPIC, b"", batch=True, extra=props))
    assert batch.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in (batch.remark or "")
    delayed = await client.invoke(broker.addr, send_request(TOPIC, b"x",
                                                            extra={**props, "DELAY": "2"}))
    assert delayed.code == ResponseCode.MESSAGE_ILLEGAL


async def test_broker_can_refuse_transactions(tmp_path: Path, namesrv: NamesrvController,
                                              client: RemotingClient) -> None:
    async with running_broker(tmp_path, namesrv, reject_transaction_message=True) as controller:
        resp = await client.invoke(controller.addr, send_request(
            TOPIC, b"x", extra={"TRAN_MSG": "true", "PGROUP": PGROUP}))
        assert resp.code == ResponseCode.NO_PERMISSION
        assert "sending transaction message is forbidden" in (resp.remark or "")
