"""RecallMessage: a delay message withdrawn before its time through the proxy, by the recall
handle its SendMessage answer carried (raw stubs and the official Node.js client); what 5.3.3
answers to bad handles and topics, and to a broker with recall off (its default)."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy.config import ProxyConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.proxy.conftest import Stack, running_stack
from tests.proxy.nodejs import NodeClient
from tests.proxy.send_cases import HEADERS, message

pytestmark = pytest.mark.timeout(120)

#: Long polls of 1 s (5.3.3's minimum is 5 s), so a receive finding nothing ends at once.
PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1,
                    grpc_client_consumer_min_long_polling_timeout_millis=1000,
                    grpc_client_consumer_max_long_polling_timeout_millis=3000,
                    min_invisible_time_mills_for_recv=1000)
GROUP = "RecallGroup"
#: The delay of the messages a test recalls one of (the recall must beat it).
DELAY_MS = 2_000
#: How long after its delivery time a timer message may still come: a tick of the timer
#: wheel (timerPrecisionMs, 1 s) and as much again.
LATE_MS = 2_000


@pytest.fixture
async def stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, PROXY, recall_message_enable=True) as s:
        await s.create_topic("Later", message_type="DELAY")
        await s.create_topic("Now")
        yield s


@pytest.fixture
async def stub(stack: Stack) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


async def send_later(stub: service_pb2_grpc.MessagingServiceStub, body: bytes,
                     delay_ms: int) -> spb.SendResultEntry:
    sent = await stub.SendMessage(spb.SendMessageRequest(messages=[message(
        "Later", body, delivery_in_ms=delay_ms, tag="T")]), metadata=HEADERS, timeout=10)
    assert sent.status.code == pb.OK, sent.status
    return sent.entries[0]


async def recall(stub: service_pb2_grpc.MessagingServiceStub, handle: str,
                 topic: str = "Later") -> spb.RecallMessageResponse:
    return await stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=topic), recall_handle=handle), metadata=HEADERS, timeout=10)


async def receive(stub: service_pb2_grpc.MessagingServiceStub, until_ms: int,
                  expected: bytes | None = None) -> list[bytes]:
    """Bodies received from Later (and acked) until the clock passes `until_ms` and, when
    given, `expected` has come (at most a minute)."""
    call_headers = (("x-mq-client-id", "recall-consumer-1"), *HEADERS[1:])
    settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=GROUP), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="Later"),
            expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
    telemetry = stub.Telemetry(metadata=call_headers, timeout=60)
    await telemetry.write(spb.TelemetryCommand(settings=settings))
    await telemetry.read()
    bodies: list[bytes] = []
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP), batch_size=16, auto_renew=False,
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Later"), id=-1))
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromSeconds(1)
    deadline = time.monotonic() + 60
    while (int(time.time() * 1000) < until_ms or expected not in (None, *bodies)) \
            and time.monotonic() < deadline:
        async for answer in stub.ReceiveMessage(request, metadata=call_headers, timeout=10):
            if answer.HasField("message"):
                bodies.append(answer.message.body)
                await stub.AckMessage(spb.AckMessageRequest(
                    group=pb.Resource(name=GROUP), topic=pb.Resource(name="Later"),
                    entries=[spb.AckMessageEntry(
                        message_id=answer.message.system_properties.message_id,
                        receipt_handle=answer.message.system_properties.receipt_handle)]),
                    metadata=call_headers, timeout=10)
    await telemetry.done_writing()
    telemetry.cancel()
    return bodies


async def test_a_recalled_message_is_not_delivered(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    due_ms = int(time.time() * 1000) + DELAY_MS
    kept = await send_later(stub, b"kept", DELAY_MS)
    gone = await send_later(stub, b"gone", DELAY_MS)
    handle = base64.urlsafe_b64decode(gone.recall_handle).decode().split(" ")
    assert handle[0] == "v1" and handle[1] == "Later" and handle[4] == gone.message_id
    assert kept.recall_handle
    answer = await recall(stub, gone.recall_handle)
    assert (answer.status.code, answer.message_id) == (pb.OK, gone.message_id)
    # kept comes; gone, due at the same time, does not (not by a timer tick after it either)
    assert await receive(stub, due_ms + LATE_MS, b"kept") == [b"kept"]


async def test_answers_as_5_3_3(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    gone = await send_later(stub, b"x", 60_000)
    normal = await stub.SendMessage(spb.SendMessageRequest(messages=[message("Now")]),
                                    metadata=HEADERS, timeout=10)
    assert normal.entries[0].recall_handle == ""  # only parked timers have one
    other = base64.urlsafe_b64encode(f"v1 Later elsewhere {int(time.time() * 1000) + 9000} "
                                     "X".encode()).decode()
    cases = {
        "not a DELAY topic": (gone.recall_handle, "Now", pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                              "TopicMessageType validate failed, the expected type is NORMAL, "
                              "but actual type is DELAY"),
        "a bad handle": ("garbage!!", "Later", pb.INTERNAL_SERVER_ERROR,
                         "recall handle is invalid"),
        "no handle": ("", "Later", pb.INTERNAL_SERVER_ERROR, "recall handle is invalid"),
        "another broker": (other, "Later", pb.INTERNAL_SERVER_ERROR,
                           "recall failed, broker service not available"),
        "a long topic": (gone.recall_handle, "T" * 200, pb.ILLEGAL_TOPIC,
                         "The specified topic is longer than topic max length 127."),
    }
    for name, (handle, topic, code, text) in cases.items():
        answer = await recall(stub, handle, topic)
        assert (answer.status.code, answer.status.message) == (code, text), name
    twice = [await recall(stub, gone.recall_handle) for _ in range(2)]
    assert [a.status.code for a in twice] == [pb.OK, pb.OK]  # as 5.3.3: no check of repeats


async def test_recall_is_forbidden_by_default(tmp_path: Path,
                                              namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv, PROXY) as stack:
        await stack.create_topic("Later", message_type="DELAY")
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            gone = await send_later(stub, b"x", 60_000)
            answer = await recall(stub, gone.recall_handle)
    assert (answer.status.code, answer.status.message) == (
        pb.INTERNAL_SERVER_ERROR, "recall failed, operation is forbidden")


async def test_the_node_client_recalls(stack: Stack, stub: service_pb2_grpc.MessagingServiceStub,
                                       node_client: NodeClient) -> None:
    due_ms = int(time.time() * 1000) + DELAY_MS  # at the latest: they are sent after this
    events = await node_client.run("recall.js", endpoint=stack.endpoint, topic="Later",
                                   messages=["node-kept", "node-gone"], delayMs=DELAY_MS,
                                   recall=[1])
    sent = [e for e in events if e["event"] == "sent"]
    assert all(e["recallHandle"] for e in sent), sent
    assert [e for e in events if e["event"] == "recalled"] == [
        {"event": "recalled", "messageId": sent[1]["messageId"]}]
    assert await receive(stub, due_ms + LATE_MS, b"node-kept") == [b"node-kept"]
    events = await node_client.run("recall.js", endpoint=stack.endpoint, topic="Later",
                                   messages=["x"], delayMs=60_000, recall=[0], handle="bad")
    (failed,) = [e for e in events if e["event"] == "recall-failed"]
    assert "recall handle is invalid" in str(failed["message"])
