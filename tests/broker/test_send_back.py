"""CONSUMER_SEND_MSG_BACK through the real protocol: the 16-step retry schedule, then the DLQ.

The broker runs on a manual clock with the default delay levels, so the test walks the whole
schedule (10 s ... 2 h) by moving the clock, not by waiting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.admin import BrokerStatsData
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.message import MessageRecord, decode_records
from engine.protocol.perm import PERM_RW
from engine.protocol.wire import from_json, to_ext
from engine.remoting.client import RemotingClient
from engine.store.record_scan import SCHEDULE_TOPIC
from tests.clock import ManualClock

from .conftest import call, running_broker
from .helpers import pull_request, send_request

TOPIC = "Payments"
GROUP = "PaymentWorkers"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"
SECOND, MINUTE, HOUR = 1000, 60_000, 3_600_000
# The seeds' schedule: retry n waits for level 2 + n of the default table.
SCHEDULE = [10 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 3 * MINUTE, 4 * MINUTE, 5 * MINUTE,
            6 * MINUTE, 7 * MINUTE, 8 * MINUTE, 9 * MINUTE, 10 * MINUTE, 20 * MINUTE,
            30 * MINUTE, HOUR, 2 * HOUR]


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock) as controller:
        yield controller


async def send_back(client: RemotingClient, broker: BrokerController, record: MessageRecord,
                    *, delay_level: int = 0, max_times: int | None = None) -> int:
    header = ConsumerSendMsgBackRequestHeader(
        offset=record.physical_offset, group=GROUP, delay_level=delay_level,
        origin_msg_id=record.msg_id, origin_topic=TOPIC, max_reconsume_times=max_times)
    resp = await call(client, broker.addr, RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header))
    return resp.code


async def pull_one(client: RemotingClient, broker: BrokerController, topic: str,
                   offset: int) -> MessageRecord | None:
    resp = await client.invoke(broker.addr, pull_request(topic, 0, offset, group=GROUP))
    if resp.code != ResponseCode.SUCCESS:
        return None
    [record] = decode_records(resp.body or b"")
    return record


async def test_failing_consumer_walks_the_retry_schedule_into_the_dlq(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    resp = await client.invoke(broker.addr, send_request(
        TOPIC, b"charge 42", queue_id=0, tags="Card", keys="order-42 cust-7",
        extra={"currency": "EUR", "UNIQ_KEY": "7F000001000018B4AAC2"}))
    assert resp.code == ResponseCode.SUCCESS
    original = await pull_one(client, broker, TOPIC, 0)
    assert original is not None
    origin_offset_id = original.offset_msg_id
    schedule = broker.state.schedule

    current = original
    for retry, delay in enumerate(SCHEDULE, start=1):
        assert await send_back(client, broker, current) == ResponseCode.SUCCESS
        level = 2 + retry
        assert broker.state.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1) >= 1
        clock.advance(delay - 1)
        await schedule.run_once()
        assert await pull_one(client, broker, RETRY, retry - 1) is None, f"retry {retry} early"
        clock.advance(1)
        await schedule.run_once()
        redelivered = await pull_one(client, broker, RETRY, retry - 1)
        assert redelivered is not None, f"retry {retry} not delivered after {delay} ms"
        props = redelivered.properties()
        assert redelivered.reconsume_times == retry
        assert redelivered.body == b"charge 42"
        # As Apache: the retry keeps its level and where it was parked for.
        assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"]) == (
            str(level), RETRY, str(redelivered.queue_id))
        assert props["UNIQ_KEY"] == "7F000001000018B4AAC2"
        assert props["ORIGIN_MESSAGE_ID"] == origin_offset_id
        assert props["RETRY_TOPIC"] == TOPIC
        assert (props["KEYS"], props["TAGS"], props["currency"]) == ("order-42 cust-7", "Card",
                                                                    "EUR")
        current = redelivered

    # The 17th failure: reconsumeTimes 16 >= max 16 -> dead letter, at once.
    assert await send_back(client, broker, current) == ResponseCode.SUCCESS
    dlq = broker.state.topics.get(DLQ)
    assert dlq is not None and (dlq.read_queue_nums, dlq.write_queue_nums) == (1, 1)
    assert dlq.perm == PERM_RW
    found = broker.state.store.get_message("ops", DLQ, 0, 0, 8)
    [dead] = decode_records(found.messages[0])
    props = dead.properties()
    assert dead.body == b"charge 42" and dead.reconsume_times == 17
    assert props["UNIQ_KEY"] == "7F000001000018B4AAC2"
    assert props["ORIGIN_MESSAGE_ID"] == origin_offset_id
    assert props["RETRY_TOPIC"] == TOPIC and props["DELAY"] == "0"  # Apache's level 0
    assert (props["KEYS"], props["currency"]) == ("order-42 cust-7", "EUR")
    # Keys stay queryable on the dead letter, so an operator finds it by business key.
    resp = await call(client, broker.addr, RequestCode.QUERY_MESSAGE, {
        "topic": DLQ, "key": "order-42", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(clock.now + 1)})
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(resp.body or b"")] == [b"charge 42"]


async def test_requested_level_and_per_request_max(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    await client.invoke(broker.addr, send_request(TOPIC, b"x", queue_id=0))
    original = await pull_one(client, broker, TOPIC, 0)
    assert original is not None
    assert await send_back(client, broker, original, delay_level=1) == ResponseCode.SUCCESS
    clock.advance(SECOND)
    await broker.state.schedule.run_once()
    retried = await pull_one(client, broker, RETRY, 0)
    assert retried is not None and retried.reconsume_times == 1
    assert await send_back(client, broker, retried, max_times=1) == ResponseCode.SUCCESS
    assert broker.state.store.get_max_offset_in_queue(DLQ, 0) == 1
    # A negative level asks for the DLQ straight away.
    assert await send_back(client, broker, original, delay_level=-1) == ResponseCode.SUCCESS
    assert broker.state.store.get_max_offset_in_queue(DLQ, 0) == 2


async def test_group_max_from_subscription_group_config(
        broker: BrokerController, client: RemotingClient) -> None:
    group = broker.state.groups.find_or_create(GROUP)
    assert group is not None
    broker.state.groups.put(replace(group, retry_max_times=0))
    await client.invoke(broker.addr, send_request(TOPIC, b"x", queue_id=0))
    original = await pull_one(client, broker, TOPIC, 0)
    assert original is not None
    assert await send_back(client, broker, original) == ResponseCode.SUCCESS
    assert broker.state.store.get_max_offset_in_queue(DLQ, 0) == 1


async def test_send_back_errors(broker: BrokerController, client: RemotingClient) -> None:
    header = ConsumerSendMsgBackRequestHeader(offset=123_456_789, group=GROUP, delay_level=0)
    resp = await call(client, broker.addr, RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "look message by offset failed, 123456789"


async def send_backs_counted(client: RemotingClient, broker: BrokerController, key: str
                             ) -> int | None:
    """SNDBCK_PUT_NUMS of `key` over the last minute, as VIEW_BROKER_STATS_DATA answers it."""
    resp = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": "SNDBCK_PUT_NUMS", "statsKey": key})
    if resp.code != ResponseCode.SUCCESS:
        return None
    return from_json(BrokerStatsData, fastjson.loads(resp.body or b"")).stats_minute.sum


async def test_send_backs_are_counted_by_first_topic_and_group(
        broker: BrokerController, client: RemotingClient, clock: ManualClock) -> None:
    key = f"{TOPIC}@{GROUP}"
    assert await send_backs_counted(client, broker, key) is None  # nothing sent back yet
    await client.invoke(broker.addr, send_request(TOPIC, b"x", queue_id=0))
    original = await pull_one(client, broker, TOPIC, 0)
    assert original is not None
    assert await send_back(client, broker, original, delay_level=1) == ResponseCode.SUCCESS
    assert await send_backs_counted(client, broker, key) == 1
    clock.advance(SECOND)
    await broker.state.schedule.run_once()
    retried = await pull_one(client, broker, RETRY, 0)
    assert retried is not None
    # Failed again, now from the retry topic and into the DLQ: still counted under the topic
    # it first failed on (its RETRY_TOPIC), as Apache's incSendBackNums keys it.
    assert await send_back(client, broker, retried, max_times=1) == ResponseCode.SUCCESS
    assert broker.state.store.get_max_offset_in_queue(DLQ, 0) == 1
    assert await send_backs_counted(client, broker, key) == 2
    assert await send_backs_counted(client, broker, f"{RETRY}@{GROUP}") is None
