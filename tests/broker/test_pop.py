"""POP over remoting on a real broker: pop + ack, revive (never into a DLQ), change invisible
time, batch ack.

The broker runs on a manual clock here, so invisible times pass by moving the clock and a
revive round is run by hand (`revive_due`); the long-polling tests are in test_pop_polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.broker.config import BrokerConfig
from engine.broker.controller import BrokerController
from engine.broker.metrics.lag import group_lags
from engine.broker.pop.names import REVIVE_GROUP
from engine.common import config as configlib
from engine.common.config import ConfigError
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.admin import ConsumeStats
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.pop import INIT_MODE_MAX, INIT_MODE_MIN
from engine.protocol.message import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from engine.protocol.wire import from_json
from engine.remoting.client import RemotingClient
from tests.clock import ManualClock
from tests.sending import send_one

from .conftest import call, running_broker
from .helpers import send_request
from .pop_calls import ack, batch_ack, change_invisible, pop

TOPIC = "Orders"
GROUP = "OrderWorkers"
RETRY = f"%RETRY%{GROUP}_{TOPIC}"
DLQ = f"%DLQ%{GROUP}"


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 clock: ManualClock) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, clock=clock) as controller:
        controller.state.topics.put(TopicConfig(TOPIC, 2, 2))
        yield controller


async def send(client: RemotingClient, broker: BrokerController, n: int, *,
               queue_id: int = 0, tags: str | None = None) -> list[bytes]:
    bodies = []
    for i in range(n):
        body = f"m{queue_id}-{i}".encode()
        await send_one(client, broker.addr, "broker-a", TOPIC, body, queue_id=queue_id,
                       tags=tags)
        bodies.append(body)
    return bodies


def revive(broker: BrokerController, clock: ManualClock, ms: int) -> int:
    clock.advance(ms)
    return broker.state.pop.revive.revive_due()


async def test_pop_then_ack_leaves_nothing_in_flight(client: RemotingClient,
                                                     broker: BrokerController,
                                                     clock: ManualClock) -> None:
    sent = await send(client, broker, 3, queue_id=0) + await send(client, broker, 2, queue_id=1)
    got = await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN)
    assert got.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in got.messages) == sorted(sent)
    header = got.header
    assert header is not None and header.invisible_time == 60_000
    assert header.pop_time == clock.now and header.rest_num == 0
    assert 0 <= header.revive_qid < 8
    pop_state = broker.state.pop
    assert pop_state.inflight(TOPIC, GROUP, 0) == 3 and pop_state.inflight(TOPIC, GROUP, 1) == 2
    assert broker.state.offsets.queue_offsets(GROUP, TOPIC) == {0: 3, 1: 2}
    for m in got.messages:
        assert (await ack(client, broker.addr, m)).code == ResponseCode.SUCCESS
    assert pop_state.inflight(TOPIC, GROUP, 0) == 0 and pop_state.inflight(TOPIC, GROUP, 1) == 0
    again = await pop(client, broker.addr, GROUP, TOPIC)
    assert again.code == ResponseCode.POLLING_TIMEOUT and again.messages == []
    assert again.remark == "NO_MESSAGE_IN_QUEUE"
    assert revive(broker, clock, 61_000) == 0  # everything was acked


async def test_unacked_message_comes_back_once_with_reconsume_times_one(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    """A 5.x client's delivery attempt is reconsumeTimes + 1: the second delivery is attempt 2."""
    await send(client, broker, 1)
    first = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=10_000,
                      init_mode=INIT_MODE_MIN)
    assert [m.record.reconsume_times for m in first.messages] == [0]
    assert revive(broker, clock, 9_999) == 0
    assert (await pop(client, broker.addr, GROUP, TOPIC)).messages == []  # still invisible
    assert revive(broker, clock, 1) == 1
    assert broker.state.topics.get(RETRY) is not None
    second = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=10_000)
    [again] = second.messages
    assert again.body == first.messages[0].body
    assert again.record.topic == TOPIC  # handed out under the topic asked for
    assert again.record.reconsume_times == 1
    props = again.record.properties()
    assert props[PROPERTY_FIRST_POP_TIME] == str(first.header.pop_time if first.header else 0)
    assert again.receipt.retry == "1" and again.real_topic == RETRY
    assert PROPERTY_POP_CK in props
    assert (await ack(client, broker.addr, again)).code == ResponseCode.SUCCESS
    assert revive(broker, clock, 60_000) == 0


async def test_ack_of_an_expired_receipt_is_success_and_the_message_still_returns(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    await send(client, broker, 1)
    [m] = (await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=5_000,
                     init_mode=INIT_MODE_MIN)).messages
    assert revive(broker, clock, 5_000) == 1
    assert (await ack(client, broker.addr, m)).code == ResponseCode.SUCCESS
    assert [x.body for x in (await pop(client, broker.addr, GROUP, TOPIC)).messages] == [m.body]


async def test_ack_outside_the_queue_answers_no_message(
        client: RemotingClient, broker: BrokerController) -> None:
    await send(client, broker, 1)
    [m] = (await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN)).messages
    bad = replace(m, record=replace(m.record, queue_offset=5))
    assert (await ack(client, broker.addr, bad)).code == ResponseCode.NO_MESSAGE
    wrong_queue = replace(m, receipt=replace(m.receipt, queue_id=7))
    assert (await ack(client, broker.addr, wrong_queue)).code == ResponseCode.MESSAGE_ILLEGAL


async def test_change_invisible_time_extends_and_shortens(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    await send(client, broker, 2)
    a, b = (await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=10_000,
                      init_mode=INIT_MODE_MIN)).messages
    resp, a2 = await change_invisible(client, broker.addr, a, 60_000)
    assert resp.code == ResponseCode.SUCCESS and a2 is not None
    assert a2.receipt.pop_time == clock.now + 1  # not the first pop's time: see acker.py
    assert a2.receipt.invisible_time == 60_000
    resp, b2 = await change_invisible(client, broker.addr, b, 1_000)
    assert resp.code == ResponseCode.SUCCESS and b2 is not None
    assert broker.state.pop.inflight(TOPIC, GROUP, 0) == 2
    assert revive(broker, clock, 1_001) == 1  # b, shortened
    assert revive(broker, clock, 20_000) == 0  # a, extended past its first 10 s
    assert (await ack(client, broker.addr, a2)).code == ResponseCode.SUCCESS
    assert revive(broker, clock, 60_000) == 0
    [back] = (await pop(client, broker.addr, GROUP, TOPIC)).messages
    assert back.body == b.body and back.record.reconsume_times == 1


async def test_batch_ack(client: RemotingClient, broker: BrokerController,
                         clock: ManualClock) -> None:
    await send(client, broker, 6, queue_id=0)
    await send(client, broker, 4, queue_id=1)
    got = (await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=10_000,
                     init_mode=INIT_MODE_MIN)).messages
    assert len(got) == 10
    kept = [m for m in got if m.record.queue_offset == 2 and m.receipt.queue_id == 0]
    resp = await batch_ack(client, broker.addr, [m for m in got if m not in kept])
    assert resp.code == ResponseCode.SUCCESS
    assert broker.state.pop.inflight(TOPIC, GROUP, 0) == 1
    assert broker.state.pop.inflight(TOPIC, GROUP, 1) == 0
    assert revive(broker, clock, 10_000) == 1
    [back] = (await pop(client, broker.addr, GROUP, TOPIC)).messages
    assert back.body == kept[0].body


async def test_the_revive_never_dead_letters(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    """retryMaxTimes 2: the message comes back with reconsume times 0, 1, 2, 3, 4 ... and
    never reaches %DLQ%<group> at a revive, as 5.3.3's `reviveRetry` puts every message back
    into the pop retry topic: the consumer that pops it past its count dead-letters it."""
    config = broker.state.groups.find_or_create(GROUP)
    assert config is not None
    broker.state.groups.put(replace(config, retry_max_times=2))
    await send(client, broker, 1)
    attempts = []
    for _ in range(5):
        got = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=1_000,
                        init_mode=INIT_MODE_MIN)
        attempts += [m.record.reconsume_times for m in got.messages]
        revive(broker, clock, 1_000)
    assert attempts == [0, 1, 2, 3, 4]
    assert broker.state.topics.get(DLQ) is None
    [back] = (await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=1_000)).messages
    assert back.record.reconsume_times == 5  # from the pop retry topic, reported as TOPIC
    assert back.body == b"m0-0"


async def test_new_group_starts_at_the_last_message_unless_the_queue_is_young(
        client: RemotingClient, broker: BrokerController) -> None:
    await send(client, broker, 3)
    st = broker.state
    # a young queue (starts at 0, first message in memory): from the first message
    got = await pop(client, broker.addr, "young", TOPIC, queue_id=0, init_mode=INIT_MODE_MAX)
    assert [m.body for m in got.messages] == [b"m0-0", b"m0-1", b"m0-2"]
    st.config = replace(st.config, init_pop_offset_by_check_msg_in_mem=False)
    got = await pop(client, broker.addr, "late", TOPIC, queue_id=0, init_mode=INIT_MODE_MAX)
    assert [m.body for m in got.messages] == [b"m0-2"]  # 5.3 pops the last one


async def test_tag_filter(client: RemotingClient, broker: BrokerController) -> None:
    await send(client, broker, 2, tags="a")
    await send(client, broker, 2, queue_id=1, tags="b")
    got = await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN, exp="b",
                    exp_type="TAG")
    assert sorted(m.body for m in got.messages) == [b"m1-0", b"m1-1"]


async def test_sql92_filter_without_enable_property_filter(client: RemotingClient,
                                                           broker: BrokerController) -> None:
    """5.3.3's POP compiles and evaluates SQL92 whatever enablePropertyFilter says."""
    assert not broker.state.config.enable_property_filter
    await send(client, broker, 2, tags="a")
    await send(client, broker, 2, queue_id=1, tags="b")
    got = await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN,
                    exp="TAGS = 'b'", exp_type="SQL92")
    assert sorted(m.body for m in got.messages) == [b"m1-0", b"m1-1"]
    bad = await pop(client, broker.addr, GROUP, TOPIC, exp="a >>", exp_type="SQL92")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_zero_messages_asked_polls_and_finds_none(client: RemotingClient,
                                                        broker: BrokerController) -> None:
    """maxMsgNums 0: nothing is popped (5.3.3; with a poll time it polls it out, see
    tests/proxy/test_receive_rules.py)."""
    await send(client, broker, 2)
    got = await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN, max_nums=0)
    assert (got.code, got.messages) == (ResponseCode.POLLING_TIMEOUT, [])
    again = await pop(client, broker.addr, GROUP, TOPIC, init_mode=INIT_MODE_MIN)
    assert sorted(m.body for m in again.messages) == [b"m0-0", b"m0-1"]


async def test_refusals(client: RemotingClient, broker: BrokerController) -> None:
    assert (await pop(client, broker.addr, GROUP, "Nope")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await pop(client, broker.addr, GROUP, TOPIC, max_nums=33)).code == \
        ResponseCode.INVALID_PARAMETER
    assert (await pop(client, broker.addr, GROUP, TOPIC, queue_id=2)).code == \
        ResponseCode.INVALID_PARAMETER


async def test_revive_offset_follows_the_oldest_pending_checkpoint(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    st = broker.state
    await send(client, broker, 2)
    [a] = (await pop(client, broker.addr, GROUP, TOPIC, max_nums=1, queue_id=0,
                     init_mode=INIT_MODE_MIN)).messages
    [b] = (await pop(client, broker.addr, GROUP, TOPIC, max_nums=1, queue_id=0)).messages
    topic = st.pop.revive_topic
    qa, qb = a.receipt.revive_qid, b.receipt.revive_qid
    revive(broker, clock, 0)
    assert st.offsets.query(REVIVE_GROUP, topic, qa) == -1  # its checkpoint is pending
    await ack(client, broker.addr, a)
    revive(broker, clock, 0)
    assert st.offsets.query(REVIVE_GROUP, topic, qa) == \
        st.store.get_max_offset_in_queue(topic, qa) - 1
    if qb != qa:
        assert st.offsets.query(REVIVE_GROUP, topic, qb) == -1


async def test_consume_stats_and_lag_count_messages_in_flight(
        client: RemotingClient, broker: BrokerController) -> None:
    """5.3's way for a POP group: lag = ready + in flight, in flight = pull - consumer."""
    await send(client, broker, 3, queue_id=0)
    await send(client, broker, 2, queue_id=1)
    got = await pop(client, broker.addr, GROUP, TOPIC, queue_id=0, max_nums=2,
                    init_mode=INIT_MODE_MIN)
    await ack(client, broker.addr, got.messages[0])
    resp = await call(client, broker.addr, RequestCode.GET_CONSUME_STATS,
                      {"consumerGroup": GROUP, "topic": TOPIC})
    stats = from_json(ConsumeStats, fastjson.loads(resp.body or b"{}"))
    q0 = stats.offset_table[MessageQueue(TOPIC, "broker-a", 0)]
    assert (q0.broker_offset, q0.consumer_offset, q0.pull_offset) == (3, 1, 2)
    [lag] = [g for g in group_lags(broker.state) if (g.group, g.topic) == (GROUP, TOPIC)]
    assert (lag.lag, lag.inflight, lag.ready) == (2, 1, 1)  # queue 1 not popped: no offset


async def test_acks_read_together_are_each_answered(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    """A 5.x client acks message by message: many acks arrive in one read (one append)."""
    await send(client, broker, 10)
    got = (await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=5_000,
                     init_mode=INIT_MODE_MIN)).messages
    bad = replace(got[0], record=replace(got[0].record, queue_offset=99))
    answers = await asyncio.gather(*(ack(client, broker.addr, m) for m in [*got[1:], bad]))
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 9 + [ResponseCode.NO_MESSAGE]
    assert broker.state.pop.inflight(TOPIC, GROUP, 0) == 1
    assert revive(broker, clock, 5_000) == 1


@pytest.mark.parametrize(("key", "value", "says"), [
    ("reviveQueueNum", "0", "reviveQueueNum=0 must be between 1 and 998"),
    ("reviveInterval", "0", "reviveInterval=0 must be at least 1"),
    ("popFromRetryProbability", "101", "popFromRetryProbability=101 is a percentage"),
    ("maxPopPollingSize", "-1", "maxPopPollingSize=-1 must not be negative"),
])
def test_pop_settings_are_checked(key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        configlib.load(BrokerConfig, {key: value})
    assert configlib.load(BrokerConfig, {"reviveQueueNum": "4"})[0].revive_queue_num == 4


async def test_checkpoints_of_revive_queues_beyond_a_lowered_revive_queue_num_still_revive(
        client: RemotingClient, tmp_path: Path, namesrv: NamesrvController,
        clock: ManualClock) -> None:
    async with running_broker(tmp_path, namesrv, clock=clock) as first:
        first.state.topics.put(TopicConfig(TOPIC, 1, 1))
        await send(client, first, 4)
        for _ in range(4):  # four pops: four checkpoints, in revive queues 0, 1, 2, 3
            got = await pop(client, first.addr, GROUP, TOPIC, max_nums=1, queue_id=0,
                            invisible_ms=5_000, init_mode=INIT_MODE_MIN)
            assert len(got.messages) == 1
    async with running_broker(tmp_path, namesrv, clock=clock, revive_queue_num=2) as second:
        assert second.state.pop.log.revive_qids == [0, 1, 2, 3]
        assert revive(second, clock, 5_000) == 4


@pytest.mark.parametrize("code", [RequestCode.ACK_MESSAGE,
                                  RequestCode.CHANGE_MESSAGE_INVISIBLETIME])
async def test_a_receipt_that_does_not_parse_is_refused_clearly(
        client: RemotingClient, broker: BrokerController, code: int) -> None:
    await send(client, broker, 1, queue_id=0)  # offset 0 exists: the receipt is what is wrong
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": "not a receipt",
           "offset": "0", "invisibleTime": "1000"}
    resp = await client.invoke(broker.addr, request(code, ext), timeout=10)
    assert resp.code != ResponseCode.SUCCESS
    assert resp.remark is not None and "receipt" in resp.remark
    # the broker goes on serving
    assert (await pop(client, broker.addr, GROUP, TOPIC)).code in (
        ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE,
        ResponseCode.PULL_NOT_FOUND)


async def test_a_revived_delayed_message_waits_for_its_level_again(
        client: RemotingClient, broker: BrokerController, clock: ManualClock) -> None:
    """As 5.3.3 (checked against the build): a message delivered from delay level 2 keeps
    DELAY, so its revive is parked for the level again and reaches the retry topic 5 s later,
    with REAL_TOPIC naming the retry topic."""
    sent = await client.invoke(broker.addr, send_request(TOPIC, b"later", extra={"DELAY": "2"}))
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    clock.advance(5_000)
    await broker.state.schedule.run_once()
    first = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=10_000,
                      init_mode=INIT_MODE_MIN)
    assert [m.record.properties()["DELAY"] for m in first.messages] == ["2"]
    assert revive(broker, clock, 10_000) == 1
    assert (await pop(client, broker.addr, GROUP, TOPIC)).messages == []  # parked again
    clock.advance(5_000)
    await broker.state.schedule.run_once()
    [again] = (await pop(client, broker.addr, GROUP, TOPIC)).messages
    props = again.record.properties()
    assert (props["DELAY"], props["REAL_TOPIC"], again.record.reconsume_times) == ("2", RETRY, 1)
