"""Manual store maintenance through the protocol: expired commit log, expired and unused queues."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import BrokerMessage
from engine.remoting.client import RemotingClient

from .conftest import broker_configs, call
from .test_admin_topic import create_topic, put_messages


@pytest.fixture
async def small_broker(tmp_path: Path,
                       namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    """4 KiB commit-log segments that expire at once, but only when deletion is asked for."""
    config, store = broker_configs(
        tmp_path, f"127.0.0.1:{namesrv.port}", "broker-s", mapped_file_size_commit_log=4096,
        file_reserved_time=0, delete_when="99", clean_resource_interval=50,
        delete_physic_files_interval=0)
    controller = BrokerController(config, store)
    controller.state.store.cleanup.disk_usage = lambda path: 0.1  # far below every ratio
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


async def put_big(broker: BrokerController, topic: str, count: int) -> None:
    for _ in range(count):
        result = await broker.state.store.put_message(BrokerMessage(topic, b"x" * 200))
        assert result.ok, result


async def test_delete_expired_commit_log_then_clean_expired_queues(
        small_broker: BrokerController, client: RemotingClient) -> None:
    store = small_broker.state.store
    await put_big(small_broker, "Old", 40)
    await put_big(small_broker, "New", 30)
    assert len(store.commit_log.mfq.files) > 3
    await asyncio.sleep(0.3)  # a few cleanup rounds: nothing is due without the request
    assert store.get_min_phy_offset() == 0

    resp = await call(client, small_broker.addr, RequestCode.DELETE_EXPIRED_COMMITLOG)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    for _ in range(100):
        if len(store.commit_log.mfq.files) == 1:
            break
        await asyncio.sleep(0.05)
    assert len(store.commit_log.mfq.files) == 1  # every segment but the one being written
    assert store.get_min_phy_offset() > 0
    assert store.get_max_offset_in_queue("Old", 0) == 40  # the queue itself is still there

    resp = await call(client, small_broker.addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    queues = store.topic_queues()
    assert "Old" not in queues  # every entry pointed below the commit log's new start
    assert queues["New"] == [0]


async def test_clean_unused_topic_keeps_configured_and_internal_queues(
        broker: BrokerController, client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "Kept", queues=1)
    for topic in ("Kept", "Ghost", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC"):
        await put_messages(broker, topic, 0, 1)
    await put_messages(broker, "Ghost", 3, 1)
    resp = await call(client, broker.addr, RequestCode.CLEAN_UNUSED_TOPIC)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    assert set(broker.state.store.topic_queues()) == {
        "Kept", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
