"""`BrokerAdmin` against a real in-process broker: one test per call family, plus errors."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.broker import RESET_TO_MAX, BrokerAdmin, message_store_addr
from engine.client.core.errors import (
    BadResponseError,
    ConsumeMsgTimeoutError,
    ConsumerNotOnlineError,
    InvalidAddressError,
    NoPermissionError,
    ServerSystemError,
    TopicNotExistError,
    UnreachableError,
)
from engine.protocol import fastjson
from engine.protocol.body.admin import CMResult, TopicOffset
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.message import decode_record
from engine.remoting.client import RemotingClient
from tests.broker.helpers import heartbeat, send_request
from tests.conftest import closed_port_addr

from .conftest import Handler
from .consumer import REPORTED_OFFSET, FakeConsumer

FakeServer = Callable[[dict[int, Handler]], Awaitable[str]]


async def send(broker: BrokerController, topic: str, body: bytes, *, queue_id: int = 0,
               keys: str | None = None, extra: dict[str, str] | None = None) -> str:
    """Send one message through the protocol; returns its offset message id."""
    client = RemotingClient()
    try:
        request = send_request(topic, body, queue_id=queue_id, keys=keys, extra=extra)
        resp = await client.invoke(broker.addr, request, 5)
    finally:
        await client.close()
    assert resp.code == 0, resp.remark
    return (resp.ext_fields or {})["msgId"]


def mq(topic: str, queue_id: int = 0) -> MessageQueue:
    return MessageQueue(topic, "broker-a", queue_id)


# ---------------------------------------------------------------------------- topics


async def test_topics(broker: BrokerController, broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("AdminTopic", 2, 2))
    table = (await broker_admin.all_topic_config(addr)).topic_config_table
    assert table["AdminTopic"] == TopicConfig("AdminTopic", 2, 2)
    assert "SCHEDULE_TOPIC_XXXX" in (await broker_admin.system_topics(addr)).topic_list

    await send(broker, "AdminTopic", b"one", queue_id=1)
    stats = await broker_admin.topic_stats(addr, "AdminTopic")
    assert stats.offset_table[mq("AdminTopic", 0)] == TopicOffset(0, 0, 0)
    assert stats.offset_table[mq("AdminTopic", 1)].max_offset == 1

    broker.state.offsets.commit("CG", "AdminTopic", 0, 0)
    assert (await broker_admin.topic_consumed_by(addr, "AdminTopic")).group_list == {"CG"}

    await broker_admin.delete_topic(addr, "AdminTopic")
    assert "AdminTopic" not in (await broker_admin.all_topic_config(addr)).topic_config_table
    with pytest.raises(TopicNotExistError) as caught:
        await broker_admin.topic_stats(addr, "AdminTopic")
    assert caught.value.addr == addr
    with pytest.raises(ServerSystemError, match="conflict with system topic"):
        await broker_admin.create_topic(addr, TopicConfig("SCHEDULE_TOPIC_XXXX"))


# ---------------------------------------------------------------------------- groups


async def test_groups_and_offset_tables(broker: BrokerController,
                                        broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    config = SubscriptionGroupConfig("AdminGroup", retry_max_times=3,
                                     consume_broadcast_enable=False)
    await broker_admin.create_group(addr, config)
    groups = await broker_admin.all_group_config(addr)
    assert groups.subscription_group_table["AdminGroup"] == config
    assert groups.data_version.counter > 0

    await broker_admin.create_topic(addr, TopicConfig("GroupTopic", 2, 2))
    await broker_admin.update_consumer_offset(addr, "AdminGroup", "GroupTopic", 1, 0)
    offsets = await broker_admin.all_consumer_offsets(addr)
    assert offsets.offset_table["GroupTopic@AdminGroup"] == {1: 0}

    await broker_admin.clone_group_offset(addr, "AdminGroup", "Copy", topic="GroupTopic")
    assert (await broker_admin.all_consumer_offsets(addr)).offset_table[
        "GroupTopic@Copy"] == {1: 0}

    delay = await broker_admin.all_delay_offsets(addr)
    assert fastjson.loads(delay.text or "{}").get("offsetTable", {}) == delay.offset_table

    await broker_admin.delete_group(addr, "AdminGroup", remove_offsets=True)
    assert "AdminGroup" not in (await broker_admin.all_group_config(addr)).subscription_group_table
    assert "GroupTopic@AdminGroup" not in (
        await broker_admin.all_consumer_offsets(addr)).offset_table


# ---------------------------------------------------------------------------- consumers


async def test_consume_stats_connections_and_spans(broker: BrokerController,
                                                   broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("StatsTopic", 1, 1))
    for i in range(3):
        await send(broker, "StatsTopic", b"m%d" % i)
    await broker_admin.update_consumer_offset(addr, "CG", "StatsTopic", 0, 1)

    stats = await broker_admin.consume_stats(addr, "CG", "StatsTopic")
    wrapper = stats.offset_table[mq("StatsTopic")]
    assert (wrapper.broker_offset, wrapper.consumer_offset) == (3, 1)
    assert wrapper.last_timestamp > 0 and stats.compute_total_diff() == 2

    with pytest.raises(ConsumerNotOnlineError):
        await broker_admin.consumer_connections(addr, "CG")
    with pytest.raises(ServerSystemError, match="no consumer"):
        await broker_admin.consumer_ids(addr, "CG")

    async with FakeConsumer(addr, "C1", "CG", ("StatsTopic",)):
        connections = await broker_admin.consumer_connections(addr, "CG")
        assert {c.client_id for c in connections.connection_set} == {"C1"}
        assert set(connections.subscription_table) == {"StatsTopic"}
        assert await broker_admin.consumer_ids(addr, "CG") == ["C1"]

        listing = await broker_admin.broker_consume_stats(addr)
        assert listing.broker_addr == addr and listing.total_diff >= 2
        by_group = {g: s for entry in listing.consume_stats_list for g, s in entry.items()}
        assert mq("StatsTopic") in by_group["CG"][0].offset_table

    [span] = await broker_admin.consume_time_span(addr, "StatsTopic", "CG")
    assert span.message_queue == mq("StatsTopic")
    assert 0 < span.min_time_stamp <= span.consume_time_stamp <= span.max_time_stamp

    broker.state.offsets.commit("Other", "StatsTopic", 0, 2)
    # the smallest offset of all groups (CG at 1, Other at 2), or 2**63-1 where CG is behind
    assert await broker_admin.correction_offsets(addr, "StatsTopic", "CG") == {0: 1}
    assert await broker_admin.correction_offsets(addr, "StatsTopic", "CG",
                                                 filter_groups=("CG",)) == {0: 2**63 - 1}


async def test_producer_connections(broker: BrokerController, broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    with pytest.raises(ServerSystemError, match="not exist"):
        await broker_admin.producer_connections(addr, "PG")
    client = RemotingClient()
    try:
        resp = await client.invoke(addr, send_request("ProducedTopic", b"x", group="PG"), 5)
        assert resp.code == 0
        assert (await client.invoke(addr, heartbeat("P1", producer_group="PG"), 5)).code == 0
        producers = await broker_admin.producer_connections(addr, "PG")
        assert [c.client_id for c in producers.connection_set] == ["P1"]
        info = await broker_admin.all_producer_info(addr)
        assert [p.client_id for p in info.data["PG"]] == ["P1"]
    finally:
        await client.close()


async def test_calls_relayed_to_a_consumer(broker: BrokerController,
                                           broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("Relayed", 1, 1))
    msg_id = await send(broker, "Relayed", b"payload")
    assert message_store_addr(msg_id) == addr
    async with FakeConsumer(addr, "C1", "CG", ("Relayed",)) as consumer:
        info = await broker_admin.consumer_running_info(addr, "CG", "C1", jstack=True)
        assert info.properties["clientId"] == "C1" and info.jstack == "main thread"
        assert info.mq_table[mq("Relayed")].commit_offset == 3

        result = await broker_admin.consume_message_directly(addr, "CG", "C1", msg_id)
        assert (result.consume_result, result.spent_time_mills) == (CMResult.CR_SUCCESS, 2)
        await consumer.calls.get()  # running info
        relayed = await consumer.calls.get()
        assert decode_record(relayed.body or b"").body == b"payload"
        assert relayed.ext("brokerName") == "broker-a"

        status = await broker_admin.consumer_status(addr, "Relayed", "CG")
        assert status.consumer_table == {"C1": {mq("Relayed"): REPORTED_OFFSET}}

        with pytest.raises(ServerSystemError, match="not online"):
            await broker_admin.consumer_running_info(addr, "CG", "Nobody")


async def test_reset_offset(broker: BrokerController, broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("Reset", 1, 1))
    for i in range(3):
        await send(broker, "Reset", b"m%d" % i)
    await broker_admin.update_consumer_offset(addr, "CG", "Reset", 0, 3)
    with pytest.raises(ConsumerNotOnlineError):
        await broker_admin.reset_offset(addr, "Reset", "CG", 0)

    async with FakeConsumer(addr, "C1", "CG", ("Reset",)) as consumer:
        assert await broker_admin.reset_offset(addr, "Reset", "CG", 0) == {mq("Reset"): 0}
        notice = await consumer.calls.get()
        assert notice.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
        assert await broker_admin.consumer_offset(addr, "CG", "Reset", 0) == 0

        table = await broker_admin.reset_offset(addr, "Reset", "CG", RESET_TO_MAX,
                                                cpp_clients=True)
        assert table == {mq("Reset"): 3}
        notice = await consumer.calls.get()  # C++ clients get the table as a list
        assert fastjson.loads(notice.body or b"")["offsetTable"][0]["offset"] == 3


# ---------------------------------------------------------------------------- offsets


async def test_queue_offsets(broker: BrokerController, broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("Offsets", 1, 1))
    assert await broker_admin.earliest_msg_store_time(addr, "Offsets", 0) == -1
    before = int(time.time() * 1000) - 1
    for i in range(2):
        await send(broker, "Offsets", b"m%d" % i)
    assert await broker_admin.max_offset(addr, "Offsets", 0) == 2
    assert await broker_admin.min_offset(addr, "Offsets", 0) == 0
    earliest = await broker_admin.earliest_msg_store_time(addr, "Offsets", 0)
    assert earliest >= before
    assert await broker_admin.search_offset(addr, "Offsets", 0, earliest) == 0

    await broker_admin.update_consumer_offset(addr, "G", "Offsets", 0, 2)
    assert await broker_admin.consumer_offset(addr, "G", "Offsets", 0) == 2
    # no offset committed, but the queue still starts at 0 in memory: 0, as 4.9.7 answers
    assert await broker_admin.consumer_offset(addr, "New", "Offsets", 0) == 0


# ---------------------------------------------------------------------------- messages


async def test_messages(broker: BrokerController, broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    await broker_admin.create_topic(addr, TopicConfig("Msgs", 1, 1))
    uniq = "7F00000100002A9F0000000000000001"
    msg_id = await send(broker, "Msgs", b"first", keys="order-1 shared",
                        extra={"UNIQ_KEY": uniq})
    await send(broker, "Msgs", b"second", keys="shared")

    found = await broker_admin.query_message(addr, "Msgs", "shared")
    assert sorted(m.body for m in found.messages) == [b"first", b"second"]
    assert found.index_last_update_timestamp > 0
    [by_key] = (await broker_admin.query_message(addr, "Msgs", "order-1")).messages
    assert by_key.offset_msg_id == msg_id
    assert (await broker_admin.query_message(addr, "Msgs", "nothing")).messages == []
    assert (await broker_admin.query_message(addr, "Other", "shared")).messages == []

    [by_uniq] = await broker_admin.query_message_by_unique_key(addr, "Msgs", uniq)
    assert (by_uniq.body, by_uniq.msg_id) == (b"first", uniq)

    viewed = await broker_admin.view_message(addr, msg_id)
    assert (viewed.topic, viewed.body, viewed.keys) == ("Msgs", b"first", ["order-1", "shared"])
    assert await broker_admin.view_message_at(addr, viewed.physical_offset) == viewed
    with pytest.raises(ServerSystemError):
        await broker_admin.view_message_at(addr, 10**9)
    with pytest.raises(ValueError, match="offset message id"):
        await broker_admin.view_message(addr, uniq[:-2])

    entries = await broker_admin.query_consume_queue(addr, "Msgs", 0, 0, 5)
    assert (entries.min_queue_index, entries.max_queue_index) == (0, 2)
    assert entries.queue_data[0].physic_offset == viewed.physical_offset
    with pytest.raises(ServerSystemError, match="not exist"):
        await broker_admin.query_consume_queue(addr, "Msgs", 9, 0, 1)


# ---------------------------------------------------------------------------- the broker


async def test_broker_settings_figures_and_store(tmp_path: Path, broker: BrokerController,
                                                 broker_admin: BrokerAdmin) -> None:
    addr = broker.addr
    config = await broker_admin.broker_config(addr)
    assert config["brokerName"] == "broker-a"
    assert config["storePathRootDir"] == str(tmp_path / "broker-a" / "store")

    await broker_admin.update_broker_config(addr, {"flushConsumerOffsetInterval": 7000})
    assert (await broker_admin.broker_config(addr))["flushConsumerOffsetInterval"] == "7000"
    with pytest.raises(NoPermissionError, match="brokerName"):
        await broker_admin.update_broker_config(addr, {"brokerName": "other"})

    info = (await broker_admin.runtime_info(addr)).table
    assert info["brokerVersionDesc"].startswith("V")
    assert float(info["putTps"].split()[0]) >= 0

    await send(broker, "StatsOf", b"x")
    stats = await broker_admin.broker_stats(addr, "TOPIC_PUT_NUMS", "StatsOf")
    assert stats.stats_day.sum >= 0
    with pytest.raises(ServerSystemError, match="not exist"):
        await broker_admin.broker_stats(addr, "TOPIC_PUT_NUMS", "NeverSent")

    await broker_admin.clean_expired_consume_queue(addr)
    await broker_admin.delete_expired_commit_log(addr)
    await broker_admin.clean_unused_topic(addr)


# ---------------------------------------------------------------------------- errors


async def test_unreachable_and_invalid_addresses(broker_admin: BrokerAdmin,
                                                 silent_server: str) -> None:
    dead = closed_port_addr()
    with pytest.raises(UnreachableError) as caught:
        await broker_admin.all_topic_config(dead)
    assert caught.value.addrs == [dead] and str(caught.value).startswith(f"broker {dead}")
    assert not caught.value.timed_out

    slow = BrokerAdmin(broker_admin.client, timeout=0.2)
    with pytest.raises(UnreachableError) as caught:
        await slow.runtime_info(silent_server)
    assert caught.value.timed_out

    with pytest.raises(InvalidAddressError):
        await broker_admin.runtime_info("no-port")


async def test_answers_that_do_not_decode(broker_admin: BrokerAdmin,
                                          fake_namesrv: FakeServer) -> None:
    handlers: dict[int, Handler] = {
        RequestCode.GET_TOPIC_STATS_INFO: lambda cmd: cmd.response(body=b"{not json"),
        RequestCode.GET_ALL_TOPIC_CONFIG: lambda cmd: cmd.response(),
        RequestCode.GET_MAX_OFFSET: lambda cmd: cmd.response(),
        RequestCode.GET_CONSUMER_RUNNING_INFO: lambda cmd: cmd.response(
            ResponseCode.CONSUME_MSG_TIMEOUT, "consumer <CG> <C1> Timeout"),
    }
    addr = await fake_namesrv(handlers)
    with pytest.raises(BadResponseError, match="TopicStatsTable"):
        await broker_admin.topic_stats(addr, "T")
    with pytest.raises(BadResponseError, match="without a body"):
        await broker_admin.all_topic_config(addr)
    with pytest.raises(BadResponseError, match="offset"):
        await broker_admin.max_offset(addr, "T", 0)
    with pytest.raises(ConsumeMsgTimeoutError) as caught:
        await broker_admin.consumer_running_info(addr, "CG", "C1")
    assert caught.value.summary == "consumer <CG> <C1> Timeout"


async def test_topic_attributes_and_orderly_groups(broker: BrokerController,
                                                   broker_admin: BrokerAdmin) -> None:
    """RocketMQ 5 calls: create with attribute changes, GET_TOPIC_CONFIG (351) and
    GET_SUBSCRIPTIONGROUP_CONFIG (352)."""
    await broker_admin.create_topic(broker.addr, TopicConfig("Fifo", 2, 2),
                                    attributes={"+message.type": "FIFO"})
    config = await broker_admin.topic_config(broker.addr, "Fifo")
    assert (config.write_queue_nums, config.message_type) == (2, "FIFO")
    await broker_admin.create_topic(broker.addr, TopicConfig("Fifo", 4, 4))  # kept
    assert (await broker_admin.topic_config(broker.addr, "Fifo")).attributes == {
        "message.type": "FIFO"}
    with pytest.raises(ServerSystemError, match="unsupported key: colour"):
        await broker_admin.create_topic(broker.addr, TopicConfig("Fifo", 4, 4),
                                        attributes={"+colour": "red"})
    with pytest.raises(TopicNotExistError):
        await broker_admin.topic_config(broker.addr, "Nope")
    await broker_admin.create_group(broker.addr, SubscriptionGroupConfig(
        "Orderly", consume_message_orderly=True))
    assert (await broker_admin.group_config(broker.addr, "Orderly")).orderly is True


async def test_runtime_info_asked_before_an_apache_brokers_first_sample_is_asked_again(
        broker_admin: BrokerAdmin, fake_namesrv: FakeServer) -> None:
    """Apache 4.9.8 in its first second answers runtime info with SYSTEM_ERROR (its stats
    samples are empty): asked once more, the console shows the broker, not an error; any
    other SYSTEM_ERROR is the answer."""
    asked: list[int] = []

    def runtime(cmd: RemotingCommand) -> RemotingCommand:
        asked.append(cmd.opaque)
        if len(asked) == 1:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                "java.util.NoSuchElementException\n\tat java.util.LinkedList")
        return cmd.response(body=b'{"table":{"brokerVersionDesc":"V4_9_8"}}')

    def broken(cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "java.lang.NullPointerException")

    addr = await fake_namesrv({RequestCode.GET_BROKER_RUNTIME_INFO: runtime})
    assert (await broker_admin.runtime_info(addr)).table == {"brokerVersionDesc": "V4_9_8"}
    assert len(asked) == 2
    addr = await fake_namesrv({RequestCode.GET_BROKER_RUNTIME_INFO: broken})
    with pytest.raises(ServerSystemError, match="NullPointerException"):
        await broker_admin.runtime_info(addr)
