"""Delay levels through the real protocol: parked in SCHEDULE_TOPIC_XXXX, delivered when due,
nothing lost or doubled across a restart.  The broker runs on a manual clock, so "due" is
decided by the test, not by waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole, MessageStoreConfig
from engine.store.errors import StoreConfigError
from engine.store.record_scan import SCHEDULE_TOPIC
from tests.clock import ManualClock

from .conftest import broker_configs, pull_all, running_broker
from .helpers import send_request

TOPIC = "Delayed"


def start_broker(tmp_path: Path, namesrv: NamesrvController, clock: ManualClock,
                 **changes: object) -> BrokerController:
    config, store = broker_configs(tmp_path, f"127.0.0.1:{namesrv.port}", **changes)
    return BrokerController(config, store, clock=clock)


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock) as controller:
        yield controller


def queue_size(broker: BrokerController, topic: str, queue_id: int) -> int:
    return broker.state.store.get_max_offset_in_queue(topic, queue_id)


async def test_delayed_message_is_parked_then_delivered_when_due(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, b"later", queue_id=0, tags="TagA", keys="order-1",
        extra={"DELAY": "2", "color": "blue"}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (resp.ext_fields or {})["queueId"] == "0"
    assert queue_size(broker, SCHEDULE_TOPIC, 1) == 1  # level 2 -> queue 1
    assert queue_size(broker, TOPIC, 0) == 0

    await broker.state.schedule.run_once()
    assert queue_size(broker, TOPIC, 0) == 0  # level 2 is 5 s: not yet
    clock.advance(4_999)
    await broker.state.schedule.run_once()
    assert queue_size(broker, TOPIC, 0) == 0
    clock.advance(1)
    await broker.state.schedule.run_once()

    [record] = await pull_all(client, broker, TOPIC)
    props = record.properties()
    assert record.body == b"later"
    assert (props["TAGS"], props["KEYS"], props["color"]) == ("TagA", "order-1", "blue")
    # As Apache 4.9.8 and 5.3.3 store it: the level stays (a consumer's getDelayTimeLevel()
    # reads 2), with where it was going; it is not parked again.
    assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"]) == ("2", TOPIC, "0")
    assert "WAIT" not in props
    assert record.store_timestamp == clock.now
    assert broker.state.schedule.offsets[2] == 1
    await broker.state.schedule.run_once()
    assert queue_size(broker, TOPIC, 0) == 1  # delivered once


async def test_level_beyond_the_table_is_clamped_to_the_last(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    resp = await client.invoke(broker.addr, send_request(TOPIC, b"x", extra={"DELAY": "99"}))
    assert resp.code == ResponseCode.SUCCESS
    assert queue_size(broker, SCHEDULE_TOPIC, 17) == 1
    clock.advance(2 * 3_600_000)  # level 18 = 2 h
    await broker.state.schedule.run_once()
    assert queue_size(broker, TOPIC, 0) == 1


async def test_delayed_messages_survive_a_restart_without_loss_or_duplicates(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        clock: ManualClock) -> None:
    first = start_broker(tmp_path, namesrv, clock)
    await first.start()
    for i in range(3):
        for level in (1, 3):
            resp = await client.invoke(first.addr, send_request(
                TOPIC, f"L{level}-{i}".encode(), extra={"DELAY": str(level)}))
            assert resp.code == ResponseCode.SUCCESS
    clock.advance(1000)  # level 1 (1 s) due, level 3 (10 s) not
    await first.state.schedule.run_once()
    assert queue_size(first, TOPIC, 0) == 3
    await first.stop()
    saved = fastjson.loads((Path(first.state.store_config.config_dir) / "delayOffset.json")
                           .read_bytes())
    assert (saved["offsetTable"][1], saved["offsetTable"][3]) == (3, 0)

    second = start_broker(tmp_path, namesrv, clock)
    await second.start()
    try:
        await second.state.schedule.run_once()
        assert queue_size(second, TOPIC, 0) == 3  # level 1 not delivered twice
        clock.advance(9000)
        await second.state.schedule.run_once()
        bodies = sorted(r.body.decode() for r in await pull_all(client, second, TOPIC))
        assert bodies == sorted(f"L{level}-{i}" for i in range(3) for level in (1, 3))
    finally:
        await second.stop()


async def test_slave_does_not_deliver(tmp_path: Path, namesrv: NamesrvController,
                                      client: RemotingClient, clock: ManualClock) -> None:
    master = start_broker(tmp_path, namesrv, clock)
    await master.start()
    resp = await client.invoke(master.addr, send_request(TOPIC, b"x", extra={"DELAY": "1"}))
    assert resp.code == ResponseCode.SUCCESS
    await master.stop()

    slave = start_broker(tmp_path, namesrv, clock, broker_id=1, broker_role=BrokerRole.SLAVE)
    await slave.start()
    try:
        clock.advance(60_000)
        await slave.state.schedule.run_once()
        assert queue_size(slave, TOPIC, 0) == 0
    finally:
        await slave.stop()


def test_bad_delay_levels_are_a_config_error() -> None:
    with pytest.raises(StoreConfigError, match="messageDelayLevel: bad level 2 '5x'"):
        MessageStoreConfig().update({"messageDelayLevel": "1s 5x"})
    cfg = MessageStoreConfig()
    cfg.update({"messageDelayLevel": "1s 2m 3h 1d"})
    assert cfg.delay_level_table() == {1: 1000, 2: 120_000, 3: 10_800_000, 4: 86_400_000}
