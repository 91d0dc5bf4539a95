"""The official 5.x Python SimpleConsumer and PushConsumer through the proxy (over POP).

These tests need the broker's POP (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME):
they skip, saying so, while the broker answers POP_MESSAGE with REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.pop import INIT_MODE_MAX, PopMessageRequestHeader
from engine.protocol.wire import to_ext
from engine.proxy.config import ProxyConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.proxy.conftest import Stack, in_thread, running_stack, stored
from tests.proxy.official import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

GROUP = "GrpcConsumers"
#: Long polls of 1 s (5.3.3's are 5 s to 20 s; a PushConsumer's is the maximum) and invisible
#: times from 1 s, so empty receives take a second and redeliveries a few.
CONSUMER_PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1,
                             grpc_client_consumer_min_long_polling_timeout_millis=1000,
                             grpc_client_consumer_max_long_polling_timeout_millis=1000,
                             min_invisible_time_mills_for_recv=1000)
#: The broker of the consumers' tests: a revive round every 200 ms without idle stretching
#: (1 s, up to 3 s, by default), so a message past its invisible time is back at once.
QUICK_REVIVE: dict[str, Any] = {"revive_interval": 200, "revive_max_slow": 1}
AWAIT_S = 1
#: How long a message may take to come (back): generous, the machine may be busy.
RECEIVE_WITHIN_S = 60


async def broker_pops(stack: Stack) -> bool:
    header = PopMessageRequestHeader(GROUP, "PopProbe", -1, 1, 1000, 0, 0, INIT_MODE_MAX)
    client = RemotingClient(credentials=stack.broker.access.inner_credentials())
    try:
        resp = await client.invoke(stack.broker.addr,
                                   request(RequestCode.POP_MESSAGE, to_ext(header)), 5)
    finally:
        await client.close()
    return resp.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED


@pytest.fixture
async def pop_stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, CONSUMER_PROXY, **QUICK_REVIVE) as stack:
        if not await broker_pops(stack):
            pytest.skip("the broker does not serve POP_MESSAGE yet (5.x POP, issue 24)")
        await stack.create_topic("Pops")
        yield stack


async def send(stack: Stack, *bodies: bytes) -> list[str]:
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials()), ("Pops",))
    await in_thread(producer.startup)
    try:
        ids = []
        for body in bodies:
            msg = Message()
            msg.topic, msg.body, msg.tag = "Pops", body, "TagA"
            ids.append((await in_thread(producer.send, msg)).message_id)
        return ids
    finally:
        await in_thread(producer.shutdown)


async def simple_consumer(stack: Stack) -> SimpleConsumer:
    consumer = SimpleConsumer(ClientConfiguration(stack.endpoint, Credentials()), GROUP,
                              {"Pops": FilterExpression("TagA")}, await_duration=AWAIT_S)
    await in_thread(consumer.startup)
    return consumer


async def receive_all(consumer: SimpleConsumer, count: int, invisible_s: int) -> list[Message]:
    """`count` messages or more, received in long polls of AWAIT_S (at most RECEIVE_WITHIN_S)."""
    got: list[Message] = []
    deadline = asyncio.get_running_loop().time() + RECEIVE_WITHIN_S
    while len(got) < count and asyncio.get_running_loop().time() < deadline:
        got += await in_thread(consumer.receive, 32, invisible_s) or []
    return got


async def test_receive_and_ack(pop_stack: Stack) -> None:
    ids = await send(pop_stack, b"a", b"b", b"c")
    consumer = await simple_consumer(pop_stack)
    try:
        got = await receive_all(consumer, 3, invisible_s=30)
        assert sorted(m.message_id for m in got) == sorted(ids)
        assert {m.body for m in got} == {b"a", b"b", b"c"}
        assert {m.topic for m in got} == {"Pops"}
        for m in got:
            await in_thread(consumer.ack, m)
        assert await in_thread(consumer.receive, 32, 30) in (None, [])  # nothing comes back
    finally:
        await in_thread(consumer.shutdown)


async def test_unacked_message_comes_back_after_its_invisible_time(pop_stack: Stack) -> None:
    (msg_id,) = await send(pop_stack, b"again")
    consumer = await simple_consumer(pop_stack)
    try:
        (first,) = await receive_all(consumer, 1, invisible_s=1)
        assert first.message_id == msg_id
        again = await receive_all(consumer, 1, invisible_s=30)
        assert [m.message_id for m in again] == [msg_id]
        assert again[0].delivery_attempt == first.delivery_attempt + 1
        await in_thread(consumer.ack, again[0])
    finally:
        await in_thread(consumer.shutdown)


async def test_change_invisible_duration_brings_a_message_back_sooner(pop_stack: Stack) -> None:
    (msg_id,) = await send(pop_stack, b"nack")
    consumer = await simple_consumer(pop_stack)
    try:
        (first,) = await receive_all(consumer, 1, invisible_s=60)
        await in_thread(consumer.change_invisible_duration, first, 1)
        again = await receive_all(consumer, 1, invisible_s=30)
        assert [m.message_id for m in again] == [msg_id]
        await in_thread(consumer.ack, again[0])
    finally:
        await in_thread(consumer.shutdown)


class _FailOnce(MessageListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.done = threading.Event()

    def consume(self, message: Message) -> ConsumeResult:
        self.seen.append((message.message_id, message.delivery_attempt))
        if len(self.seen) == 1:
            return ConsumeResult.FAILURE
        self.done.set()
        return ConsumeResult.SUCCESS


async def test_push_consumer_gets_a_failed_message_again(pop_stack: Stack) -> None:
    listener = _FailOnce()
    consumer = PushConsumer(ClientConfiguration(pop_stack.endpoint, Credentials()), GROUP,
                            listener, {"Pops": FilterExpression("*")})
    await in_thread(consumer.startup)
    try:
        (msg_id,) = await send(pop_stack, b"fails once")
        assert await in_thread(listener.done.wait, 60)
    finally:
        await in_thread(consumer.shutdown)
    assert [m for m, _ in listener.seen] == [msg_id, msg_id]
    assert listener.seen[1][1] == listener.seen[0][1] + 1


async def test_receive_without_broker_pop_answers_a_status_at_once(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    """Whatever the broker serves, a receive is answered (no hang past its long poll)."""
    async with running_stack(tmp_path, namesrv, CONSUMER_PROXY) as stack:
        await stack.create_topic("Pops")
        consumer = await simple_consumer(stack)
        try:
            await asyncio.wait_for(in_thread(_receive_or_error, consumer), AWAIT_S + 10)
        finally:
            await in_thread(consumer.shutdown)


def _receive_or_error(consumer: SimpleConsumer) -> object:
    try:
        return consumer.receive(1, 10)
    except Exception as exc:  # NOT_IMPLEMENTED from a broker without POP
        return exc


async def test_forward_to_dead_letter_queue(pop_stack: Stack) -> None:
    (msg_id,) = await send(pop_stack, b"poison")
    consumer = await simple_consumer(pop_stack)
    try:
        (got,) = await receive_all(consumer, 1, invisible_s=30)
        request_ = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name="Pops"),
            receipt_handle=got.receipt_handle, message_id=msg_id, delivery_attempt=1,
            max_delivery_attempts=17)
        async with grpc.aio.insecure_channel(pop_stack.endpoint) as channel:
            answer = await service_pb2_grpc.MessagingServiceStub(channel)\
                .ForwardMessageToDeadLetterQueue(request_, metadata=(
                    ("x-mq-client-id", "dlq-test"),), timeout=10)
        assert answer.status.code == pb.OK, answer.status
        dead = await stored(pop_stack, f"%DLQ%{GROUP}", msg_id)
        assert dead.body == b"poison"
    finally:
        await in_thread(consumer.shutdown)
