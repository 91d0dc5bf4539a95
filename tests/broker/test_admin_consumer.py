"""Consumer and producer administration through the protocol, with real clients on the line."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from engine.broker.controller import BrokerController
from engine.broker.handlers import admin_consumer
from engine.protocol import fastjson
from engine.protocol.body.admin import (
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    GetConsumerStatusBody,
    OffsetWrapper,
    ProducerConnection,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    ResetOffsetBody,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import LanguageCode, RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.message import create_offset_msg_id, decode_record
from engine.protocol.wire import from_json, to_json
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router

from .conftest import call
from .helpers import heartbeat
from .test_admin_topic import create_topic, parsed, put_messages

Calls = asyncio.Queue[RemotingCommand]


def consumer_client() -> tuple[RemotingClient, Calls]:
    """A client that records the broker's calls and answers the ones that need an answer."""
    router = Router()
    calls: Calls = asyncio.Queue()

    @router.handles(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    def record(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            calls.put_nowait(cmd)

    @router.handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
    def status(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
        calls.put_nowait(cmd)
        table = {MessageQueue("TopicTest", "broker-a", 0): 7}
        return cmd.response(body=fastjson.dumpb(to_json(GetConsumerStatusBody(table))))

    @router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.CONSUME_MESSAGE_DIRECTLY)
    def answer(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
        calls.put_nowait(cmd)
        info = ConsumerRunningInfo(properties={"consumeType": "CONSUME_PASSIVELY"})
        return cmd.response(remark="from the client", body=fastjson.dumpb(to_json(info)))

    return RemotingClient(router, None), calls


async def online(broker: BrokerController, client: RemotingClient, client_id: str,
                 group: str = "CG", topics: tuple[str, ...] = ("TopicTest",)) -> None:
    resp = await client.invoke(broker.addr, heartbeat(client_id, consumer_group=group,
                                                      topics=topics), timeout=5)
    assert resp.code == ResponseCode.SUCCESS


# ---------------------------------------------------------------------------- consume stats


async def test_consume_stats_in_fastjson_form(broker: BrokerController,
                                              client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "TopicTest", queues=1)
    results = await put_messages(broker, "TopicTest", 0, 3)
    broker.state.offsets.commit("CG", "TopicTest", 0, 2)
    resp = await call(client, broker.addr, RequestCode.GET_CONSUME_STATS,
                      {"consumerGroup": "CG", "topic": "TopicTest"})
    # request-codes.md §5.4
    assert resp.body == (b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,'
                         b'"topic":"TopicTest"}:{"brokerOffset":3,"consumerOffset":2,'
                         b'"lastTimestamp":%d}}}' % results[1].store_timestamp)


async def test_consume_stats_of_every_topic_the_group_consumes(broker: BrokerController,
                                                               client: RemotingClient) -> None:
    st = broker.state
    for topic in ("TopicTest", "Other"):
        await create_topic(client, broker.addr, topic, queues=2)
        st.offsets.commit("CG", topic, 0, 0)
    st.offsets.commit("CG", "NoConfig", 0, 0)
    resp = await call(client, broker.addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG"})
    stats = from_json(ConsumeStats, parsed(resp))
    assert {mq.topic for mq in stats.offset_table} == {"TopicTest", "Other"}
    assert len(stats.offset_table) == 4
    assert set(stats.offset_table.values()) == {OffsetWrapper(0, 0, 0)}

    consumer = RemotingClient()
    try:  # online, the group only counts the topics it subscribes
        await online(broker, consumer, "C1")
        st.stats.on_get("CG", "TopicTest", 10, 100)
        resp = await call(client, broker.addr, RequestCode.GET_CONSUME_STATS,
                          {"consumerGroup": "CG"})
        stats = from_json(ConsumeStats, parsed(resp))
        assert {mq.topic for mq in stats.offset_table} == {"TopicTest"}
    finally:
        await consumer.close()


# ---------------------------------------------------------------------------- connections


async def test_consumer_connection_list(broker: BrokerController, client: RemotingClient) -> None:
    resp = await call(client, broker.addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                      {"consumerGroup": "CG"})
    assert (resp.code, resp.remark) == (ResponseCode.CONSUMER_NOT_ONLINE,
                                        "the consumer group[CG] not online")
    consumer = RemotingClient()
    try:
        await online(broker, consumer, "10.0.0.1@1234#5678")
        conn = await consumer.connection(broker.addr)
        resp = await call(client, broker.addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                          {"consumerGroup": "CG"})
        data = from_json(ConsumerConnection, parsed(resp))
        [c] = data.connection_set
        assert (c.client_id, c.client_addr, c.language, c.version) == (
            "10.0.0.1@1234#5678", conn.local_addr, LanguageCode.PYTHON, 407)
        assert set(data.subscription_table) == {"TopicTest"}
        # request-codes.md §5.6 (key order, enum names)
        assert (resp.body or b"").startswith(
            b'{"connectionSet":[{"clientAddr":"%s","clientId":"10.0.0.1@1234#5678",'
            b'"language":"PYTHON","version":407}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
            b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
            b'"subscriptionTable":{"TopicTest":{"classFilterMode":false,'
            % conn.local_addr.encode())
    finally:
        await consumer.close()


async def test_producer_connections_and_producer_table(broker: BrokerController,
                                                       client: RemotingClient) -> None:
    resp = await call(client, broker.addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                      {"producerGroup": "PG"})
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                        "the producer group[PG] not exist")
    producer = RemotingClient()
    try:
        await producer.invoke(broker.addr, heartbeat("P1", producer_group="PG"), timeout=5)
        conn = await producer.connection(broker.addr)
        resp = await call(client, broker.addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                          {"producerGroup": "PG"})
        assert resp.body == (b'{"connectionSet":[{"clientAddr":"%s","clientId":"P1",'
                             b'"language":"PYTHON","version":407}]}' % conn.local_addr.encode())
        assert len(from_json(ProducerConnection, parsed(resp)).connection_set) == 1

        resp = await call(client, broker.addr, RequestCode.GET_ALL_PRODUCER_INFO)
        [info] = from_json(ProducerTableInfo, parsed(resp)).data["PG"]
        assert (info.client_id, info.remote_ip, info.language, info.version) == (
            "P1", "/" + conn.local_addr, LanguageCode.PYTHON, 407)
        assert info.last_update_timestamp > 0
    finally:
        await producer.close()


# ---------------------------------------------------------------------------- time span


async def test_consume_time_span(broker: BrokerController, client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "TopicTest", queues=2)
    results = await put_messages(broker, "TopicTest", 0, 3)
    broker.state.offsets.commit("CG", "TopicTest", 0, 1)
    resp = await call(client, broker.addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                      {"topic": "TopicTest", "group": "CG"})
    spans = from_json(QueryConsumeTimeSpanBody, parsed(resp)).consume_time_span_set
    assert [s.message_queue for s in spans] == [MessageQueue("TopicTest", "broker-a", q)
                                                for q in (0, 1)]
    first, second = spans
    times = [r.store_timestamp for r in results]
    assert (first.min_time_stamp, first.max_time_stamp, first.consume_time_stamp) == (
        times[0], times[2], times[0])
    assert 0 <= first.delay_time < 60_000  # now - store time of message 1
    ms = times[0] % 1000
    assert first.min_time_stamp_str == time.strftime(
        "%Y-%m-%d#%H:%M:%S", time.localtime(times[0] // 1000)) + f":{ms:03d}"
    assert (second.min_time_stamp, second.max_time_stamp, second.consume_time_stamp) == (
        -1, -1, -1)
    # 4.9.7 quirk kept: no offset (-1) is below the max offset (0), so delay = now - (-1)
    assert second.delay_time >= results[2].store_timestamp

    resp = await call(client, broker.addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                      {"topic": "Nope", "group": "CG"})
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


# ---------------------------------------------------------------------------- offset reset


def reset_ext(timestamp: int, force: bool, topic: str = "TopicTest") -> dict[str, str]:
    return {"topic": topic, "group": "CG", "timestamp": str(timestamp),
            "isForce": "true" if force else "false"}


async def test_reset_offset_tells_every_consumer_and_moves_the_table(
        broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    await create_topic(client, broker.addr, "TopicTest", queues=2)
    results = []
    for _ in range(4):  # distinct store times, so a time finds one message
        results += await put_messages(broker, "TopicTest", 0, 1)
        await asyncio.sleep(0.003)
    st.offsets.set_offsets("CG", "TopicTest", {0: 3, 1: 0})
    a, a_calls = consumer_client()
    b, b_calls = consumer_client()
    try:
        await online(broker, a, "A")
        await online(broker, b, "B")
        # back to the second message: queue 0 moves 3 -> 1, queue 1 stays at 0
        resp = await call(client, broker.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                          reset_ext(results[1].store_timestamp, False))
        q0, q1 = (MessageQueue("TopicTest", "broker-a", q) for q in (0, 1))
        assert from_json(ResetOffsetBody, parsed(resp)).offset_table == {q0: 1, q1: 0}
        assert resp.body == (b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,'
                             b'"topic":"TopicTest"}:1,{"brokerName":"broker-a","queueId":1,'
                             b'"topic":"TopicTest"}:0}}')  # request-codes.md §5.12
        assert st.offsets.queue_offsets("CG", "TopicTest") == {0: 1, 1: 0}
        for calls in (a_calls, b_calls):
            notice = await asyncio.wait_for(calls.get(), 5)
            assert notice.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and notice.is_oneway
            assert notice.ext_fields == {"topic": "TopicTest", "group": "CG", "isForce": "false",
                                         "timestamp": str(results[1].store_timestamp)}
            assert notice.body == resp.body

        # not forced, a reset never moves forward; -1 means the max offset
        resp = await call(client, broker.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                          reset_ext(-1, False))
        assert from_json(ResetOffsetBody, parsed(resp)).offset_table == {q0: 1, q1: 0}
        resp = await call(client, broker.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                          reset_ext(-1, True))
        assert from_json(ResetOffsetBody, parsed(resp)).offset_table == {q0: 4, q1: 0}
        assert st.offsets.queue_offsets("CG", "TopicTest") == {0: 4, 1: 0}
    finally:
        await a.close()
        await b.close()


async def test_reset_offset_for_a_cpp_admin_sends_the_list_form(
        broker: BrokerController, client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "TopicTest", queues=1)
    broker.state.offsets.commit("CG", "TopicTest", 0, 0)
    a, calls = consumer_client()
    try:
        await online(broker, a, "A")
        cmd = dataclasses.replace(request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                          reset_ext(-1, True)), language=LanguageCode.CPP)
        assert (await client.invoke(broker.addr, cmd, timeout=5)).code == ResponseCode.SUCCESS
        notice = await asyncio.wait_for(calls.get(), 5)
        assert notice.body == (b'{"offsetTable":[{"brokerName":"broker-a","offset":0,'
                               b'"queueId":0,"topic":"TopicTest"}]}')
    finally:
        await a.close()


async def test_reset_offset_refusals(broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    code = RequestCode.INVOKE_BROKER_TO_RESET_OFFSET
    resp = await call(client, broker.addr, code, reset_ext(0, True, topic="Nope"))
    assert (resp.code, resp.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "[reset-offset] reset offset failed, no topic in this broker. topic=Nope")
    await create_topic(client, broker.addr, "TopicTest", queues=2)
    st.offsets.commit("CG", "TopicTest", 0, 0)  # queue 1 has no offset
    resp = await call(client, broker.addr, code, reset_ext(0, True))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                        "THe consumer group <CG> not exist")
    st.offsets.commit("CG", "TopicTest", 1, 0)
    resp = await call(client, broker.addr, code, reset_ext(0, True))
    assert (resp.code, resp.remark) == (
        ResponseCode.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
        "Group: CG Topic: TopicTest Timestamp: 0")


# ---------------------------------------------------------------------------- calls to clients


async def test_consumer_status_asks_each_client(broker: BrokerController,
                                                client: RemotingClient) -> None:
    code = RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    resp = await call(client, broker.addr, code, {"topic": "TopicTest", "group": "CG"})
    assert (resp.code, resp.remark) == (
        ResponseCode.SYSTEM_ERROR, "No Any Consumer online in the consumer group: [CG]")
    a, a_calls = consumer_client()
    b, b_calls = consumer_client()
    try:
        await online(broker, a, "A")
        await online(broker, b, "B")
        resp = await call(client, broker.addr, code, {"topic": "TopicTest", "group": "CG"})
        status = from_json(GetConsumerStatusBody, parsed(resp))
        mq = MessageQueue("TopicTest", "broker-a", 0)
        assert status.consumer_table == {"A": {mq: 7}, "B": {mq: 7}}
        asked = await asyncio.wait_for(a_calls.get(), 5)
        assert asked.ext_fields == {"topic": "TopicTest", "group": "CG"}
        await asyncio.wait_for(b_calls.get(), 5)

        resp = await call(client, broker.addr, code,
                          {"topic": "TopicTest", "group": "CG", "clientAddr": "B"})
        assert set(from_json(GetConsumerStatusBody, parsed(resp)).consumer_table) == {"B"}
        assert a_calls.empty()
    finally:
        await a.close()
        await b.close()


async def test_consumer_running_info_is_forwarded(broker: BrokerController,
                                                  client: RemotingClient) -> None:
    ext = {"consumerGroup": "CG", "clientId": "A", "jstackEnable": "false"}
    resp = await call(client, broker.addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                        "The Consumer <CG> <A> not online")
    a, calls = consumer_client()
    try:
        await online(broker, a, "A")
        resp = await call(client, broker.addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "from the client")
        info = from_json(ConsumerRunningInfo, parsed(resp))
        assert info.properties == {"consumeType": "CONSUME_PASSIVELY"}
        forwarded = await asyncio.wait_for(calls.get(), 5)
        assert forwarded.ext_fields == ext
    finally:
        await a.close()


async def test_a_silent_client_times_out(broker: BrokerController, client: RemotingClient,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_consumer, "CALL_CLIENT_TIMEOUT_S", 0.2)
    silent = RemotingClient()  # answers nothing
    try:
        await online(broker, silent, "S")
        resp = await call(client, broker.addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                          {"consumerGroup": "CG", "clientId": "S", "jstackEnable": "false"})
        assert resp.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert (resp.remark or "").startswith("consumer <CG> <S> Timeout: ")
    finally:
        await silent.close()


async def test_consume_message_directly_sends_the_stored_record(
        broker: BrokerController, client: RemotingClient) -> None:
    [result] = await put_messages(broker, "TopicTest", 0, 1)
    msg_id = create_offset_msg_id(broker.state.store_host, result.wrote_offset)
    ext = {"consumerGroup": "CG", "clientId": "A", "msgId": msg_id}
    a, calls = consumer_client()
    try:
        await online(broker, a, "A")
        resp = await call(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        assert resp.code == ResponseCode.SUCCESS
        forwarded = await asyncio.wait_for(calls.get(), 5)
        assert forwarded.ext_fields == {**ext, "brokerName": "broker-a"}
        record = decode_record(forwarded.body or b"")
        assert (record.topic, record.body, record.physical_offset) == (
            "TopicTest", b"body-0", result.wrote_offset)

        missing = create_offset_msg_id(broker.state.store_host, 10**9)
        resp = await call(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                          {**ext, "msgId": missing})
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "no message at commit-log offset 1000000000" in (resp.remark or "")
        resp = await call(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                          {**ext, "msgId": "XYZ"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "not hex" in (resp.remark or "")
    finally:
        await a.close()


# ---------------------------------------------------------------------------- offsets, queues


async def test_query_correction_offset(broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    await put_messages(broker, "TopicTest", 0, 5)
    st.offsets.set_offsets("G1", "TopicTest", {0: 4, 1: 9})
    st.offsets.set_offsets("G2", "TopicTest", {0: 2, 1: 8})
    st.offsets.set_offsets("CMP", "TopicTest", {0: 3, 1: 9})
    resp = await call(client, broker.addr, RequestCode.QUERY_CORRECTION_OFFSET,
                      {"topic": "TopicTest", "compareGroup": "CMP"})
    body = from_json(QueryCorrectionOffsetBody, parsed(resp))
    assert body.correction_offsets == {0: 2, 1: 8}
    assert resp.body == b'{"correctionOffsets":{0:2,1:8}}'
    resp = await call(client, broker.addr, RequestCode.QUERY_CORRECTION_OFFSET,
                      {"topic": "TopicTest", "compareGroup": "CMP", "filterGroups": "G2,CMP"})
    body = from_json(QueryCorrectionOffsetBody, parsed(resp))
    assert body.correction_offsets == {0: 2**63 - 1, 1: 9}  # G1 alone is past CMP on queue 0
    assert st.offsets.query("G2", "TopicTest", 0) == 2  # filtering removes nothing


async def test_query_consume_queue(broker: BrokerController, client: RemotingClient) -> None:
    results = await put_messages(broker, "TopicTest", 0, 3)
    code = RequestCode.QUERY_CONSUME_QUEUE
    ext = {"topic": "TopicTest", "queueId": "0", "index": "1", "count": "5",
           "consumerGroup": "CG"}
    resp = await call(client, broker.addr, code, ext)
    data = from_json(QueryConsumeQueueResponseBody, parsed(resp))
    assert (data.min_queue_index, data.max_queue_index) == (0, 3)
    assert [(e.physic_offset, e.physic_size) for e in data.queue_data] == [
        (r.wrote_offset, r.wrote_bytes) for r in results[1:]]
    assert data.subscription_data is None and data.filter_data == "CG@TopicTest is not online!"

    consumer = RemotingClient()
    try:
        await online(broker, consumer, "C1")
        resp = await call(client, broker.addr, code, {**ext, "index": "9"})
        data = from_json(QueryConsumeQueueResponseBody, parsed(resp))
        assert resp.remark == "Index 9 of 0@TopicTest is not exist!"
        assert data.queue_data == [] and data.filter_data == "null"
        assert data.subscription_data is not None
        assert data.subscription_data.topic == "TopicTest"
    finally:
        await consumer.close()

    resp = await call(client, broker.addr, code, {**ext, "queueId": "7"})
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "7@TopicTest is not exist!")
