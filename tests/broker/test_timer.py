"""Timer messages through the real protocol: parked in rmq_sys_wheel_timer, delivered at their
time with 5.x's properties, refused as 5.x refuses them, kept across a restart.  The broker
runs on a manual clock, so "due" is decided by the test, not by waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.config import MetricsExporterType
from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.route import KVTable
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import (
    BatchItem,
    encode_batch_body,
)
from engine.protocol.wire import from_json
from engine.remoting.client import RemotingClient
from engine.store.record_scan import TIMER_TOPIC
from tests.clock import ManualClock

from .conftest import call, pull_all, running_broker
from .helpers import send_request

TOPIC = "Timed"


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock) as controller:
        yield controller


def queue_size(broker: BrokerController, topic: str, queue_id: int = 0) -> int:
    return broker.state.store.get_max_offset_in_queue(topic, queue_id)


async def send(client: RemotingClient, broker: BrokerController, body: bytes,
               **props: str) -> tuple[int, str]:
    resp = await client.invoke(broker.addr, send_request(TOPIC, body, queue_id=1, tags="T",
                                                         extra=props))
    return resp.code, resp.remark or ""


async def test_timer_is_parked_then_delivered_at_its_time(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    deliver_at = clock.now + 5_300
    code, remark = await send(client, broker, b"later", TIMER_DELIVER_MS=str(deliver_at),
                              color="blue")
    assert code == ResponseCode.SUCCESS, remark
    assert queue_size(broker, TIMER_TOPIC) == 1
    assert queue_size(broker, TOPIC, 1) == 0

    timer = broker.state.timer
    await timer.run_once()
    assert broker.state.store.timer.waiting == 1
    clock.advance(5_299)  # its slot (5 000) is taken at 5 000, the timer waits for 5 300
    await timer.run_once()
    assert queue_size(broker, TOPIC, 1) == 0
    clock.advance(1)
    await timer.run_once()

    [record] = await pull_all(client, broker, TOPIC, 1)
    props = record.properties()
    assert record.body == b"later"
    assert props["color"] == "blue" and props["TAGS"] == "T"
    assert props["TIMER_OUT_MS"] == str(deliver_at // 1000 * 1000)
    assert props["TIMER_DELIVER_MS"] == str(deliver_at)
    assert props["TIMER_DEQUEUE_MS"] == str(clock.now)
    assert "TIMER_ENQUEUE_MS" in props
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == (TOPIC, "1")  # kept, as 5.3 stores it
    assert "WAIT" not in props  # the broker keeps WAIT out of what it stores
    await timer.run_once()
    clock.advance(10_000)
    await timer.run_once()
    assert queue_size(broker, TOPIC, 1) == 1  # delivered once
    assert broker.state.store.timer.waiting == 0


async def test_delay_sec_and_delay_ms(broker: BrokerController, client: RemotingClient,
                                      clock: ManualClock) -> None:
    assert (await send(client, broker, b"s", TIMER_DELAY_SEC="3"))[0] == ResponseCode.SUCCESS
    assert (await send(client, broker, b"ms", TIMER_DELAY_MS="1500"))[0] == ResponseCode.SUCCESS
    timer = broker.state.timer
    await timer.run_once()
    clock.advance(1_499)  # 1 500 ms lands in slot 1 000 and is delivered at 1 500
    await timer.run_once()
    assert queue_size(broker, TOPIC, 1) == 0
    clock.advance(1)
    await timer.run_once()
    assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"ms"]
    clock.advance(1_499)  # 3 000 exactly is a multiple: slot 2 000, delivered at 3 000
    await timer.run_once()
    assert queue_size(broker, TOPIC, 1) == 1
    clock.advance(1)
    await timer.run_once()
    assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"ms", b"s"]


async def test_due_timer_is_an_ordinary_message(broker: BrokerController,
                                                client: RemotingClient,
                                                clock: ManualClock) -> None:
    code, _ = await send(client, broker, b"now", TIMER_DELIVER_MS=str(clock.now - 1))
    assert code == ResponseCode.SUCCESS
    assert queue_size(broker, TIMER_TOPIC) == 0
    [record] = await pull_all(client, broker, TOPIC, 1)
    assert "TIMER_OUT_MS" not in record.properties()


async def test_refusals_as_apache(broker: BrokerController, client: RemotingClient,
                                  clock: ManualClock) -> None:
    beyond = str(clock.now + 3 * 86_400_000 + 1_000)
    code, remark = await send(client, broker, b"x", TIMER_DELIVER_MS=beyond)
    assert code == ResponseCode.MESSAGE_ILLEGAL
    assert remark.startswith("timer message illegal, the delay time should not be bigger "
                             "than the max delay 259200000ms")
    code, _ = await send(client, broker, b"x", TIMER_DELAY_SEC="soon")
    assert code == ResponseCode.MESSAGE_ILLEGAL
    code, _ = await send(client, broker, b"x", TIMER_DELAY_MS="1 000")
    assert code == ResponseCode.MESSAGE_ILLEGAL
    within = str(clock.now + 3 * 86_400_000)
    assert (await send(client, broker, b"x", TIMER_DELIVER_MS=within))[0] == ResponseCode.SUCCESS
    assert queue_size(broker, TIMER_TOPIC) == 1


async def test_delay_level_wins_over_timer(broker: BrokerController, client: RemotingClient,
                                           clock: ManualClock) -> None:
    code, _ = await send(client, broker, b"x", DELAY="1", TIMER_DELAY_SEC="100")
    assert code == ResponseCode.SUCCESS
    assert queue_size(broker, TIMER_TOPIC) == 0
    assert queue_size(broker, "SCHEDULE_TOPIC_XXXX", 0) == 1


async def test_timer_disabled(tmp_path: Path, namesrv: NamesrvController,
                              client: RemotingClient, clock: ManualClock) -> None:
    async with running_broker(tmp_path, namesrv, clock=clock,
                              timer_wheel_enable=False) as broker:
        code, remark = await send(client, broker, b"x", TIMER_DELAY_SEC="5")
        assert code == ResponseCode.SYSTEM_ERROR
        assert "timerWheelEnable is false" in remark


async def test_timers_survive_a_restart_and_are_delivered_once(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        clock: ManualClock) -> None:
    async with running_broker(tmp_path, namesrv, clock=clock) as broker:
        for i in range(20):
            code, _ = await send(client, broker, b"m%d" % i, TIMER_DELAY_MS=str(1_000 + i * 500))
            assert code == ResponseCode.SUCCESS
        await broker.state.timer.run_once()
        clock.advance(5_000)
        await broker.state.timer.run_once()
        delivered = queue_size(broker, TOPIC, 1)
        assert 0 < delivered < 20
    async with running_broker(tmp_path, namesrv, clock=clock) as broker:
        assert broker.state.store.timer.congest_num_total() == 20 - delivered
        clock.advance(20_000)
        await broker.state.timer.run_once()
        await broker.state.timer.run_once()
        bodies = [r.body for r in await pull_all(client, broker, TOPIC, 1)]
        assert sorted(bodies) == sorted(b"m%d" % i for i in range(20))


async def test_operators_see_waiting_timers(tmp_path: Path, namesrv: NamesrvController,
                                            client: RemotingClient, clock: ManualClock) -> None:
    """GET_BROKER_RUNTIME_INFO with 5.3's timer keys, and the timer metrics on /metrics."""
    async with running_broker(tmp_path, namesrv, clock=clock,
                              metrics_exporter_type=MetricsExporterType.PROM,
                              metrics_prom_exporter_host="127.0.0.1",
                              metrics_prom_exporter_port=0) as broker:
        for i in range(3):
            assert (await send(client, broker, b"x", TIMER_DELAY_SEC=str(10 + i)))[0] == 0
        await broker.state.timer.run_once()
        clock.advance(3_500)
        resp = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        table = from_json(KVTable, fastjson.loads(resp.body or b"")).table
        assert table["timerCongestNum"] == "3"
        assert table["timerOffsetBehind"] == "0"
        assert table["timerReadBehind"] == "0"  # empty slots are passed as time goes
        assert float(table["timerEnqueueTps"]) >= 0.0 and "timerDequeueTps" in table

        assert broker.metrics is not None
        registry = broker.metrics.registry
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        assert registry.get_sample_value("rocketmq_timer_dequeue_lag", node) == 3
        assert registry.get_sample_value("rocketmq_timer_enqueue_lag", node) == 0
        latency = registry.get_sample_value("rocketmq_timer_dequeue_latency_milliseconds", node)
        assert latency is not None and 0 <= latency < 1_000
        assert registry.get_sample_value("rocketmq_timer_enqueue_total",
                                         {**node, "topic": TOPIC}) == 3
        clock.advance(20_000)
        await broker.state.timer.run_once()
        assert registry.get_sample_value("rocketmq_timer_dequeue_total",
                                         {**node, "topic": TOPIC}) == 3
        assert registry.get_sample_value("rocketmq_timer_dequeue_lag", node) == 0


async def test_v1_send_is_timed_and_a_batch_is_not(broker: BrokerController,
                                                   client: RemotingClient,
                                                   clock: ManualClock) -> None:
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, b"v1", queue_id=1, v2=False, extra={"TIMER_DELAY_SEC": "5"}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert queue_size(broker, TIMER_TOPIC) == 1
    body = encode_batch_body([BatchItem(0, b"b%d" % i, "TIMER_DELAY_SEC\x015") for i in range(2)])
    resp = await client.invoke(broker.addr, send_request(TOPIC, body, queue_id=1, batch=True))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert queue_size(broker, TIMER_TOPIC) == 1  # 5.3 times single messages only
    assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"b0", b"b1"]


async def test_a_transactional_timer_is_refused(broker: BrokerController,
                                                 client: RemotingClient) -> None:
    """5.3 would park the half message itself in the wheel (its REAL_TOPIC overwritten by the
    half topic's) and 5.x clients refuse it: refused here, as a DELAY level in one is."""
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, b"tx", queue_id=1, group="TxPG",
        extra={"TRAN_MSG": "true", "PGROUP": "TxPG", "UNIQ_KEY": "tx", "TIMER_DELAY_SEC": "3"}))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert "cannot be a timer message" in (resp.remark or "")
    assert queue_size(broker, TIMER_TOPIC) == 0


async def test_a_timer_joining_an_open_slot_survives_a_restart(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        clock: ManualClock) -> None:
    """A timer due within the current slot joins that open slot's chain; a restart before it
    is due takes the slot again and delivers it, and the later one, once each."""
    async with running_broker(tmp_path, namesrv, clock=clock) as broker:
        timer = broker.state.timer
        await timer.run_once()  # the current slot is taken (and open)
        assert (await send(client, broker, b"soon", TIMER_DELAY_MS="300"))[0] == 0
        assert (await send(client, broker, b"later", TIMER_DELAY_MS="5300"))[0] == 0
        await timer.run_once()
        assert broker.state.store.timer.congest_num_total() == 2
        assert queue_size(broker, TOPIC, 1) == 0
    async with running_broker(tmp_path, namesrv, clock=clock) as broker:
        timer = broker.state.timer
        assert broker.state.store.timer.congest_num_total() == 2
        clock.advance(300)
        await timer.run_once()
        assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"soon"]
        clock.advance(6_000)
        await timer.run_once()
        await timer.run_once()
        assert [r.body for r in await pull_all(client, broker, TOPIC, 1)] == [b"soon", b"later"]
