"""MessagingService answered through raw generated stubs: statuses, settings, unsupported calls."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import LanguageCode, RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.proxy.config import ProxyConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.proxy.conftest import TEST_PROXY, Stack, running_stack, stored

HEADERS = (("x-mq-client-id", "raw-client-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))
TIMEOUT = 5


@pytest.fixture
async def stub(stack: Stack) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


def normal_message(topic: str, **system: object) -> pb.Message:
    msg = pb.Message(topic=pb.Resource(name=topic), body=b"x")
    msg.system_properties.message_id = "01" + "0" * 32
    for key, value in system.items():
        setattr(msg.system_properties, key, value)
    return msg


@pytest.mark.parametrize("method, request_", [
    ("UpdateOffset", spb.UpdateOffsetRequest()),
    ("GetOffset", spb.GetOffsetRequest()),
    ("QueryOffset", spb.QueryOffsetRequest()),
])
async def test_calls_apache_leaves_unimplemented_answer_unimplemented_at_once(
        stub: service_pb2_grpc.MessagingServiceStub, method: str, request_: object) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await getattr(stub, method)(request_, metadata=HEADERS, timeout=TIMEOUT)
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_pull_message_stream_answers_unimplemented(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    call = stub.PullMessage(spb.PullMessageRequest(), metadata=HEADERS, timeout=TIMEOUT)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in call:
            pass
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_recall_message_without_a_topic_is_an_illegal_topic(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    response = await stub.RecallMessage(spb.RecallMessageRequest(), metadata=HEADERS,
                                        timeout=TIMEOUT)
    assert (response.status.code, response.status.message) == (
        pb.ILLEGAL_TOPIC, "The specified topic is blank")  # as 5.3.3 (test_recall.py: more)


async def test_a_call_without_client_id_is_refused(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    response = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")),
                                     timeout=TIMEOUT)
    assert response.status.code == pb.CLIENT_ID_REQUIRED


async def test_query_route_names_the_proxy_and_the_queues(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    missing = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Nope")),
                                    metadata=HEADERS, timeout=TIMEOUT)
    assert missing.status.code == pb.TOPIC_NOT_FOUND
    await stack.create_topic("Routed", queues=3)
    asked = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="10.0.0.9", port=8081)])
    response = await stub.QueryRoute(
        spb.QueryRouteRequest(topic=pb.Resource(name="Routed"), endpoints=asked),
        metadata=HEADERS, timeout=TIMEOUT)
    assert response.status.code == pb.OK
    queues = response.message_queues
    assert [q.id for q in queues] == [0, 1, 2]
    assert {q.permission for q in queues} == {pb.READ_WRITE}
    assert {q.broker.name for q in queues} == {stack.broker.state.config.broker_name}
    assert all(q.broker.endpoints == asked for q in queues)  # 5.3: the address asked with
    assert all(list(q.accept_message_types) == [pb.NORMAL] for q in queues)


async def test_telemetry_answers_the_merged_settings(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    await stack.create_topic("Tele")
    settings = pb.Settings(client_type=pb.PRODUCER,
                           publishing=pb.Publishing(topics=[pb.Resource(name="Tele")]))
    call = stub.Telemetry(metadata=HEADERS, timeout=TIMEOUT)
    await call.write(spb.TelemetryCommand(settings=settings))
    answer = await call.read()
    await call.done_writing()
    assert answer.status.code == pb.OK
    got = answer.settings
    assert got.publishing.max_body_size == 4 * 1024 * 1024
    assert got.publishing.validate_message_type is True  # enableTopicMessageTypeCheck
    assert got.backoff_policy.max_attempts == 3
    assert got.backoff_policy.exponential_backoff.max.seconds == 1
    assert got.metric.on is False
    heartbeat = await stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER),
                                     metadata=HEADERS, timeout=TIMEOUT)
    assert heartbeat.status.code == pb.OK


async def test_the_user_agent_of_the_settings_names_the_language(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    # The Node.js client's header says HTTP (a name Apache's LanguageCode accepts); its
    # settings say NODE_JS, which is what producerConnection shows.
    await stack.create_topic("Lang")
    headers = (("x-mq-client-id", "node-client-1"), ("x-mq-language", "HTTP"),
               ("x-mq-client-version", "1.0.8"), ("x-mq-protocol", "v2"))
    settings = pb.Settings(client_type=pb.PRODUCER, user_agent=pb.UA(language=pb.NODE_JS),
                           publishing=pb.Publishing(topics=[pb.Resource(name="Lang")]))
    call = stub.Telemetry(metadata=headers, timeout=TIMEOUT)
    await call.write(spb.TelemetryCommand(settings=settings))
    assert (await call.read()).status.code == pb.OK
    client = RemotingClient()
    try:
        conns = await BrokerAdmin(client).producer_connections(stack.broker.addr, "Lang")
    finally:
        await client.close()
        await call.done_writing()
    assert [(c.client_id, c.language) for c in conns.connection_set] == [
        ("node-client-1", LanguageCode.NODE_JS)]


async def test_telemetry_without_publishing_or_subscription_is_invalid(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    call = stub.Telemetry(metadata=HEADERS, timeout=TIMEOUT)
    await call.write(spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER)))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call.read()
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_heartbeat_before_settings_is_an_unrecognized_client(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    response = await stub.Heartbeat(spb.HeartbeatRequest(), metadata=HEADERS, timeout=TIMEOUT)
    assert response.status.code == pb.UNRECOGNIZED_CLIENT_TYPE


async def test_end_of_an_unknown_transaction_is_invalid(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    response = await stub.EndTransaction(spb.EndTransactionRequest(
        topic=pb.Resource(name="T"), transaction_id="nope", resolution=pb.COMMIT),
        metadata=HEADERS, timeout=TIMEOUT)
    assert response.status.code == pb.INVALID_TRANSACTION_ID


async def test_checks_of_a_message_answer_their_code(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    await stack.create_topic("Checked")
    empty = normal_message("Checked")
    empty.body = b""
    bad_key = normal_message("Checked")
    bad_key.user_properties["UNIQ_KEY"] = "mine"
    for msg, code in ((empty, pb.MESSAGE_BODY_EMPTY), (bad_key, pb.ILLEGAL_MESSAGE_PROPERTY_KEY)):
        response = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                          metadata=HEADERS, timeout=TIMEOUT)
        assert response.status.code == code


async def test_message_types_are_checked_against_the_topic(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    # enableTopicMessageTypeCheck (5.3's default): a topic without `message.type` is NORMAL.
    config = ProxyConfig(grpc_server_port=0)
    async with running_stack(tmp_path, namesrv, config) as stack:
        await stack.create_topic("Typed")
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            fifo = normal_message("Typed", message_group="g1")
            refused = await stub.SendMessage(spb.SendMessageRequest(messages=[fifo]),
                                             metadata=HEADERS, timeout=TIMEOUT)
            accepted = await stub.SendMessage(
                spb.SendMessageRequest(messages=[normal_message("Typed")]),
                metadata=HEADERS, timeout=TIMEOUT)
    assert refused.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is NORMAL, but actual type is FIFO" in refused.status.message
    assert accepted.status.code == pb.OK
    assert accepted.entries[0].offset == 0


async def test_several_messages_of_a_request_go_as_one_batch(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    await stack.create_topic("Batched", queues=1)
    messages = [normal_message("Batched") for _ in range(3)]
    for i, msg in enumerate(messages):
        msg.system_properties.message_id = f"01BATCH{i:026X}"
        msg.body = f"m{i}".encode()
    response = await stub.SendMessage(spb.SendMessageRequest(messages=messages),
                                      metadata=HEADERS, timeout=TIMEOUT)
    assert response.status.code == pb.OK
    assert [e.offset for e in response.entries] == [0, 1, 2]
    assert [e.message_id for e in response.entries] == [m.system_properties.message_id
                                                        for m in messages]
    for i, msg in enumerate(messages):
        record = await stored(stack, "Batched", msg.system_properties.message_id)
        assert (record.body, record.queue_offset) == (f"m{i}".encode(), i)


async def _raw(stack: Stack, code: int, ext: dict[str, str], body: bytes | None = None
               ) -> RemotingCommand:
    client = RemotingClient(credentials=stack.broker.access.inner_credentials())
    try:
        return await client.invoke(stack.broker.addr, request(code, ext, body), TIMEOUT)
    finally:
        await client.close()


async def test_topic_message_type_attribute_decides_what_is_accepted(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    """A FIFO topic (5.x attribute `message.type`, GET_TOPIC_CONFIG 351) takes FIFO messages
    only, and its route says so; skips while the broker keeps no topic attributes."""
    async with running_stack(tmp_path, namesrv, ProxyConfig(grpc_server_port=0)) as stack:
        probe = await _raw(stack, RequestCode.GET_TOPIC_CONFIG, {"topic": "TBW102"})
        if probe.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            pytest.skip("the broker keeps no topic attributes yet (GET_TOPIC_CONFIG, issue 24)")
        created = await _raw(stack, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "FifoTyped", "defaultTopic": "TBW102", "readQueueNums": "4",
            "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false", "attributes": "+message.type=FIFO"})
        assert created.code == ResponseCode.SUCCESS, created.remark
        stack.proxy.gateway.forget_route("FifoTyped")
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            for _ in range(100):  # the broker registers the new topic in the background
                route = await stub.QueryRoute(spb.QueryRouteRequest(
                    topic=pb.Resource(name="FifoTyped")), metadata=HEADERS, timeout=TIMEOUT)
                if route.status.code == pb.OK:
                    break
                stack.proxy.gateway.forget_route("FifoTyped")
                await asyncio.sleep(0.05)
            assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.FIFO,)}
            fifo = await stub.SendMessage(spb.SendMessageRequest(
                messages=[normal_message("FifoTyped", message_group="g1")]),
                metadata=HEADERS, timeout=TIMEOUT)
            normal = await stub.SendMessage(spb.SendMessageRequest(
                messages=[normal_message("FifoTyped")]), metadata=HEADERS, timeout=TIMEOUT)
    assert fifo.status.code == pb.OK
    assert normal.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


async def test_an_orderly_group_is_told_fifo_in_its_settings(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub) -> None:
    """A group with consumeMessageOrderly (GET_SUBSCRIPTIONGROUP_CONFIG 352) gets fifo=true and
    its retries; skips while the broker does not answer 352."""
    probe = await _raw(stack, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                       {"group": "probe-group"})
    if probe.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        pytest.skip("the broker does not answer GET_SUBSCRIPTIONGROUP_CONFIG yet (issue 24)")
    await stack.create_topic("Ordered")
    config = {"groupName": "OrderlyGroup", "consumeMessageOrderly": True, "retryMaxTimes": 3}
    made = await _raw(stack, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                      json.dumps(config).encode())
    assert made.code == ResponseCode.SUCCESS, made.remark
    settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="OrderlyGroup"), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="Ordered"), expression=pb.FilterExpression(expression="*"))]))
    call = stub.Telemetry(metadata=HEADERS, timeout=TIMEOUT)
    await call.write(spb.TelemetryCommand(settings=settings))
    answer = await call.read()
    await call.done_writing()
    assert answer.settings.subscription.fifo is True
    assert answer.settings.backoff_policy.max_attempts == 4


async def test_an_idle_client_is_unregistered_from_the_brokers(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    config = dataclasses.replace(TEST_PROXY, grpc_client_idle_time_mills=300)
    async with running_stack(tmp_path, namesrv, config) as stack:
        await stack.create_topic("Idle")
        settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name="IdleGroup"), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name="Idle"), expression=pb.FilterExpression(expression="*"))]))
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            call = stub.Telemetry(metadata=HEADERS, timeout=TIMEOUT)
            await call.write(spb.TelemetryCommand(settings=settings))
            assert (await call.read()).status.code == pb.OK
            await call.done_writing()
        assert stack.broker.state.consumers.get("IdleGroup") is not None
        for _ in range(200):  # the janitor runs every idle/2: 150 ms
            if stack.broker.state.consumers.get("IdleGroup") is None:
                break
            await asyncio.sleep(0.05)
        assert stack.broker.state.consumers.get("IdleGroup") is None
        assert stack.proxy.core.sessions.get("raw-client-1") is None
