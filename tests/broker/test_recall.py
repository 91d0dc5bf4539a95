"""RECALL_MESSAGE (5.3): a timer message withdrawn before its time by the recall handle its send
answered with; refusals with 5.3.3's codes and remarks.  The broker runs on a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import RecallMessageRequestHeader
from engine.protocol.recall import RecallHandle, decode_handle
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.store.record_scan import TIMER_TOPIC
from tests.clock import ManualClock

from .conftest import pull_all, running_broker
from .helpers import send_request

TOPIC = "Recalled"


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock,
                              recall_message_enable=True) as controller:
        yield controller


async def send(client: RemotingClient, broker: BrokerController, body: bytes, uniq: str,
               **props: str) -> RemotingCommand:
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, body, queue_id=1, extra={"UNIQ_KEY": uniq, **props}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def recall(client: RemotingClient, broker: BrokerController, handle: str,
                 topic: str = TOPIC) -> RemotingCommand:
    header = RecallMessageRequestHeader(topic=topic, recall_handle=handle)
    return await client.invoke(broker.addr, request(RequestCode.RECALL_MESSAGE, to_ext(header)))


async def test_a_recalled_timer_is_never_delivered(broker: BrokerController,
                                                   client: RemotingClient,
                                                   clock: ManualClock) -> None:
    at = clock.now + 5_300
    kept = await send(client, broker, b"kept", "UNIQ-KEPT", TIMER_DELIVER_MS=str(at))
    gone = await send(client, broker, b"gone", "UNIQ-GONE", TIMER_DELIVER_MS=str(at))
    handle = decode_handle((gone.ext_fields or {})["recallHandle"])
    # As 5.3.3 makes it: the topic, this broker, the timer's slot + 1, its unique key.
    assert handle == RecallHandle(TOPIC, broker.state.config.broker_name,
                                  str(at // 1000 * 1000 + 1), "UNIQ-GONE")
    assert "recallHandle" in (kept.ext_fields or {})

    answer = await recall(client, broker, (gone.ext_fields or {})["recallHandle"])
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert (answer.ext_fields or {})["msgId"] == "UNIQ-GONE"
    assert broker.state.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 3  # the marker

    timer = broker.state.timer
    await timer.run_once()
    clock.advance(6_000)
    await timer.run_once()
    await timer.run_once()
    assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"kept"]
    assert await pull_all(client, broker, TOPIC, 0) == []  # the marker is not delivered
    assert broker.state.store.timer.recalled_total == 1


async def test_messages_that_are_not_parked_timers_have_no_handle(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    for props in ({}, {"DELAY": "2"}, {"TIMER_DELIVER_MS": str(clock.now - 1)}):
        resp = await send(client, broker, b"x", "UNIQ-NONE", **props)
        assert "recallHandle" not in (resp.ext_fields or {}), props


async def test_refusals_as_5_3_3(broker: BrokerController, client: RemotingClient,
                                 clock: ManualClock, tmp_path: Path,
                                 namesrv: NamesrvController) -> None:
    name = broker.state.config.broker_name
    resp = await send(client, broker, b"x", "UNIQ-1", TIMER_DELIVER_MS=str(clock.now + 9_000))
    good = (resp.ext_fields or {})["recallHandle"]
    other = RecallHandle(TOPIC, "elsewhere", str(clock.now + 9_001), "UNIQ-1").encode()
    past = RecallHandle(TOPIC, name, str(clock.now - 1), "UNIQ-1").encode()
    far = RecallHandle(TOPIC, name, str(clock.now + 4 * 86_400_000), "UNIQ-1").encode()
    cases = [
        (good, "Elsewhere", ResponseCode.TOPIC_NOT_EXIST,
         "recall failed, the topic[Elsewhere] not exist"),
        ("not a handle", TOPIC, ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        (other, TOPIC, ResponseCode.ILLEGAL_OPERATION,
         "recall failed, broker service not available"),
        (past, TOPIC, ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        (far, TOPIC, ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
    ]
    await client.invoke(broker.addr, send_request("Other", b"x"))  # a second topic
    cases.append((good, "Other", ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match"))
    for handle, topic, code, remark in cases:
        answer = await recall(client, broker, handle, topic)
        assert (answer.code, answer.remark) == (code, remark), (topic, handle)


async def test_recall_is_off_by_default(tmp_path: Path, namesrv: NamesrvController,
                                        client: RemotingClient, clock: ManualClock) -> None:
    async with running_broker(tmp_path, namesrv, clock=clock) as broker:
        resp = await send(client, broker, b"x", "UNIQ-2", TIMER_DELIVER_MS=str(clock.now + 9_000))
        answer = await recall(client, broker, (resp.ext_fields or {})["recallHandle"])
        assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION,
                                                "recall failed, operation is forbidden")


async def test_a_recall_holds_across_a_restart(tmp_path: Path, namesrv: NamesrvController,
                                               client: RemotingClient,
                                               clock: ManualClock) -> None:
    async with running_broker(tmp_path, namesrv, clock=clock,
                              recall_message_enable=True) as broker:
        resp = await send(client, broker, b"gone", "UNIQ-R",
                          TIMER_DELIVER_MS=str(clock.now + 3_000))
        await send(client, broker, b"kept", "UNIQ-K", TIMER_DELIVER_MS=str(clock.now + 3_000))
        answer = await recall(client, broker, (resp.ext_fields or {})["recallHandle"])
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        await broker.state.timer.run_once()  # parked in the wheel, not yet due
    async with running_broker(tmp_path, namesrv, clock=clock,
                              recall_message_enable=True) as broker:
        clock.advance(5_000)
        await broker.state.timer.run_once()
        await broker.state.timer.run_once()
        assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"kept"]
