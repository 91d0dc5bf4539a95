"""POP long polling, NOTIFICATION and POLLING_INFO, and FIFO pops with two consumers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.pop import (
    INIT_MODE_MIN,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
)
from engine.protocol.receipt import parse_order_count_info, pop_retry_topic
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.client import RemotingClient
from engine.store.config import FlushDiskType
from tests.sending import send_one

from .conftest import running_broker
from .pop_calls import ack, notification_request, pop, pop_until

TOPIC = "Events"
FIFO = "Ledger"
GROUP = "EventWorkers"


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, revive_interval=50) as controller:
        controller.state.topics.put(TopicConfig(TOPIC, 2, 2))
        controller.state.topics.put(TopicConfig(FIFO, 1, 1))
        yield controller


async def held(broker: BrokerController, count: int = 1) -> None:
    """Until the broker holds `count` POP / NOTIFICATION requests."""
    async with asyncio.timeout(60):
        while broker.state.pop.polling.total < count:
            await asyncio.sleep(0.005)


async def test_long_poll_is_answered_when_a_message_arrives(client: RemotingClient,
                                                            broker: BrokerController) -> None:
    loop = asyncio.get_running_loop()
    waiting = asyncio.create_task(pop(client, broker.addr, GROUP, TOPIC, poll_ms=20_000,
                                      init_mode=INIT_MODE_MIN, timeout=30))
    await held(broker)
    info = await client.invoke(broker.addr, request(RequestCode.POLLING_INFO, to_ext(
        PollingInfoRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=-1))), timeout=5)
    assert from_ext(PollingInfoResponseHeader, info.ext_fields).polling_num == 1
    sent_at = loop.time()
    await send_one(client, broker.addr, "broker-a", TOPIC, b"now", queue_id=1)
    got = await asyncio.wait_for(waiting, 10)
    assert loop.time() - sent_at < 5  # long before the 20 s poll time
    assert got.code == ResponseCode.SUCCESS and [m.body for m in got.messages] == [b"now"]


async def test_long_poll_times_out_with_polling_timeout(client: RemotingClient,
                                                        broker: BrokerController) -> None:
    got = await pop(client, broker.addr, GROUP, TOPIC, poll_ms=300)
    assert got.code == ResponseCode.POLLING_TIMEOUT and got.messages == []
    assert broker.state.pop.polling.total == 0


async def test_polling_full(client: RemotingClient, tmp_path: Path,
                            namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv, max_pop_polling_size=1) as controller:
        controller.state.topics.put(TopicConfig(TOPIC, 1, 1))
        first = asyncio.create_task(pop(client, controller.addr, GROUP, TOPIC, poll_ms=20_000,
                                        timeout=30))
        await held(controller)
        second = await pop(client, controller.addr, GROUP, TOPIC, poll_ms=20_000)
        assert second.code == ResponseCode.POLLING_FULL
        await send_one(client, controller.addr, "broker-a", TOPIC, b"x")
        assert (await asyncio.wait_for(first, 10)).code == ResponseCode.SUCCESS


async def test_notification(client: RemotingClient, broker: BrokerController) -> None:
    async def notify(poll_ms: int) -> NotificationResponseHeader:
        resp = await client.invoke(broker.addr, notification_request(GROUP, TOPIC,
                                                                     poll_ms=poll_ms), timeout=30)
        assert resp.code == ResponseCode.SUCCESS
        return from_ext(NotificationResponseHeader, resp.ext_fields)

    assert (await notify(200)).has_msg is False
    waiting = asyncio.create_task(notify(20_000))
    await held(broker)
    await send_one(client, broker.addr, "broker-a", TOPIC, b"ping", queue_id=0)
    assert (await asyncio.wait_for(waiting, 10)).has_msg is True
    assert (await notify(0)).has_msg is True  # not popped yet: still there


async def test_unacked_message_is_revived_by_the_service(client: RemotingClient,
                                                         broker: BrokerController) -> None:
    await send_one(client, broker.addr, "broker-a", TOPIC, b"again")
    first = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=300,
                      init_mode=INIT_MODE_MIN)
    assert [m.body for m in first.messages] == [b"again"]
    back = await pop_until(client, broker.addr, GROUP, TOPIC, 1)
    assert [(m.body, m.record.reconsume_times) for m in back] == [(b"again", 1)]


async def test_fifo_one_consumer_at_a_time_in_order(client: RemotingClient,
                                                    broker: BrokerController) -> None:
    for i in range(4):
        await send_one(client, broker.addr, "broker-a", FIFO, f"f{i}".encode())
    a = await pop(client, broker.addr, GROUP, FIFO, max_nums=2, order=True, attempt_id="A",
                  init_mode=INIT_MODE_MIN)
    assert [m.body for m in a.messages] == [b"f0", b"f1"]
    assert a.header is not None and a.header.revive_qid == 999
    assert parse_order_count_info(a.header.order_count_info) == {"0@0": 0}
    b = await pop(client, broker.addr, GROUP, FIFO, order=True, attempt_id="B")
    assert b.code == ResponseCode.POLLING_TIMEOUT  # the queue is A's until f0 and f1 are acked
    waiting = asyncio.create_task(pop(client, broker.addr, GROUP, FIFO, max_nums=2, order=True,
                                      attempt_id="B", poll_ms=20_000, timeout=30))
    await held(broker)
    assert (await ack(client, broker.addr, a.messages[0])).code == ResponseCode.SUCCESS
    assert broker.state.offsets.query(GROUP, FIFO, 0) == 1
    assert not waiting.done()
    assert (await ack(client, broker.addr, a.messages[1])).code == ResponseCode.SUCCESS
    b = await asyncio.wait_for(waiting, 10)  # freed by the second ack
    assert [m.body for m in b.messages] == [b"f2", b"f3"]


async def test_fifo_redelivery_counts_and_same_attempt(client: RemotingClient,
                                                       broker: BrokerController) -> None:
    for i in range(2):
        await send_one(client, broker.addr, "broker-a", FIFO, f"f{i}".encode())
    first = await pop(client, broker.addr, GROUP, FIFO, order=True, attempt_id="A",
                      invisible_ms=200, init_mode=INIT_MODE_MIN)
    assert [m.body for m in first.messages] == [b"f0", b"f1"]
    # the same attempt id may pop again at once (a client retrying a lost answer)
    retried = await pop(client, broker.addr, GROUP, FIFO, order=True, attempt_id="A",
                        invisible_ms=200)
    assert [m.body for m in retried.messages] == [b"f0", b"f1"]
    # another attempt waits for the invisible time, then gets both again, counted once more
    again = await pop(client, broker.addr, GROUP, FIFO, order=True, attempt_id="C",
                      invisible_ms=60_000, poll_ms=10_000, timeout=20)
    assert [m.body for m in again.messages] == [b"f0", b"f1"]
    assert again.header is not None
    counts = parse_order_count_info(again.header.order_count_info)
    assert counts == {"0@qo0%0": 1, "0@qo0%1": 1, "0@0": 1}
    for m in again.messages:
        assert (await ack(client, broker.addr, m)).code == ResponseCode.SUCCESS
    assert broker.state.offsets.query(GROUP, FIFO, 0) == 2


async def test_fifo_order_info_survives_a_restart(client: RemotingClient, tmp_path: Path,
                                                  namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv) as first:
        first.state.topics.put(TopicConfig(FIFO, 1, 1))
        await send_one(client, first.addr, "broker-a", FIFO, b"f0")
        held_by_a = await pop(client, first.addr, GROUP, FIFO, order=True, attempt_id="A",
                              init_mode=INIT_MODE_MIN)
        assert [m.body for m in held_by_a.messages] == [b"f0"]
    saved = (tmp_path / "broker-a" / "store" / "config" / "consumerOrderInfo.json").read_text()
    assert f"{FIFO}@{GROUP}" in saved and '"a":"A"' in saved.replace("\t", "").replace(" ", "")
    async with running_broker(tmp_path, namesrv) as second:
        other = await pop(client, second.addr, GROUP, FIFO, order=True, attempt_id="B")
        assert other.code == ResponseCode.POLLING_TIMEOUT  # still A's
        assert (await ack(client, second.addr, held_by_a.messages[0])).code == \
            ResponseCode.SUCCESS
        assert second.state.offsets.query(GROUP, FIFO, 0) == 1


async def test_sync_flush_answers_once_the_records_are_on_disk(
        client: RemotingClient, tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv,
                              flush_disk_type=FlushDiskType.SYNC_FLUSH) as controller:
        controller.state.topics.put(TopicConfig(TOPIC, 1, 1))
        await send_one(client, controller.addr, "broker-a", TOPIC, b"durable")
        got = await pop(client, controller.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN)
        assert [m.body for m in got.messages] == [b"durable"]
        store = controller.state.store
        assert store.get_flushed_offset() >= store.get_max_phy_offset()  # the checkpoint too
        assert (await ack(client, controller.addr, got.messages[0])).code == ResponseCode.SUCCESS
        assert store.get_flushed_offset() >= store.get_max_phy_offset()


async def test_fifo_notification_wakes_when_the_held_queue_frees_itself(
        client: RemotingClient, broker: BrokerController) -> None:
    await send_one(client, broker.addr, "broker-a", FIFO, b"f0")
    held = await pop(client, broker.addr, GROUP, FIFO, order=True, attempt_id="A",
                     invisible_ms=300, init_mode=INIT_MODE_MIN)
    assert [m.body for m in held.messages] == [b"f0"]
    resp = await client.invoke(broker.addr, notification_request(
        GROUP, FIFO, poll_ms=10_000, order=True, attempt_id="B"), timeout=20)
    assert from_ext(NotificationResponseHeader, resp.ext_fields).has_msg is True


@pytest.mark.parametrize("v2", [False, True])
async def test_a_revived_message_wakes_a_held_pop_only_in_a_v2_retry_topic(
        client: RemotingClient, tmp_path: Path, namesrv: NamesrvController, v2: bool) -> None:
    """5.3.3 notifies a message of the V1 POP retry topic %RETRY%G_T under that name, which
    no held pop is registered under: the revived message waits for the next pop.  One of
    %RETRY%G+T is notified under T and wakes the group's held pops (which read only the V2 retry
    topic here: with retrieveMessageFromPopRetryTopicV1 half of them read the V1 one)."""
    async with running_broker(tmp_path, namesrv, revive_interval=50, enable_retry_topic_v2=v2,
                              retrieve_message_from_pop_retry_topic_v1=not v2) as controller:
        controller.state.topics.put(TopicConfig(TOPIC, 1, 1))
        store = controller.state.store
        await send_one(client, controller.addr, "broker-a", TOPIC, b"unacked")
        first = await pop(client, controller.addr, GROUP, TOPIC, invisible_ms=1000)
        assert [m.body for m in first.messages] == [b"unacked"]
        waiting = asyncio.create_task(pop(client, controller.addr, GROUP, TOPIC,
                                          poll_ms=20_000, timeout=30))
        await held(controller)
        retry = pop_retry_topic(TOPIC, GROUP, v2=v2)
        async with asyncio.timeout(60):  # revived into the retry topic after its 1 s
            while store.get_max_offset_in_queue(retry, 0) < 1:
                await asyncio.sleep(0.01)
        if v2:
            got = await asyncio.wait_for(waiting, 10)
        else:
            for _ in range(20):  # the arrival is handled at once; give it a few loop turns
                await asyncio.sleep(0)
            assert not waiting.done()
            waiting.cancel()
            got = await pop(client, controller.addr, GROUP, TOPIC)
        assert [m.body for m in got.messages] == [b"unacked"]
