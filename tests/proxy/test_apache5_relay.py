"""A broker's requests to a gRPC consumer through Apache 5.3.3's proxy and through ours: the
same consume results, the same answer for a silent client (opt-in,
APACHE_RMQ5_HOME; tests/apache5.py starts Apache's name server and broker with its proxy)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import ServerError
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import ResponseCode
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.test_relay import GROUP, STACK_TEXT, TOPIC, RawConsumer, headers

pytestmark = [needs_apache5, pytest.mark.timeout(300)]
__all__ = ["apache5"]

TIMEOUT = 15
CLIENT = "relay-compare-1"
CreateTopic = Callable[[str], Awaitable[None]]


async def _online(admin: BrokerAdmin, broker: str) -> None:
    for _ in range(100):  # the proxy registers the consumer with the broker in the background
        try:
            found = await admin.consumer_connections(broker, GROUP)
            if any(c.client_id == CLIENT for c in found.connection_set):
                return
        except ServerError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{CLIENT} never came online at {broker}")


async def _offset_msg_id(admin: BrokerAdmin, broker: str, message_id: str) -> str:
    for _ in range(100):  # consume queues are dispatched in the background
        stats = await admin.topic_stats(broker, TOPIC)
        for mq in stats.offset_table:
            pulled = await admin.pull_records(broker, MessageQueue(TOPIC, mq.broker_name,
                                                                   mq.queue_id), 0)
            for record in pulled.records:
                if record.properties().get("UNIQ_KEY") == message_id:
                    return record.offset_msg_id
        await asyncio.sleep(0.1)
    raise AssertionError(f"message {message_id} never reached {TOPIC}")


async def scenario(endpoint: str, broker: str, create: CreateTopic) -> dict[str, Any]:
    """What a broker answers when asked about a gRPC consumer that answers as the Go client
    does (its stack, a verification with each status), then about one that stays silent."""
    seen: dict[str, Any] = {}
    await create(TOPIC)
    client = RemotingClient()
    admin = BrokerAdmin(client)
    try:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            raw = RawConsumer(stub, CLIENT)
            await raw.start()
            try:
                await _online(admin, broker)
                try:
                    info = await admin.consumer_running_info(broker, GROUP, CLIENT,
                                                             jstack=True, timeout=TIMEOUT)
                    seen["jstack"] = info.jstack
                except ServerError as exc:
                    seen["jstack"] = exc.code
                msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"compare")
                msg.system_properties.message_id = "01" + "CD" * 16
                sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                              metadata=headers("relay-compare-producer"),
                                              timeout=TIMEOUT)
                assert sent.status.code == pb.OK, sent.status
                offset_id = await _offset_msg_id(admin, broker, sent.entries[0].message_id)
                for code in (pb.OK, pb.FAILED_TO_CONSUME_MESSAGE, pb.MESSAGE_CORRUPTED,
                             pb.NOT_IMPLEMENTED):
                    raw.verify_code = code
                    result = await admin.consume_message_directly(
                        broker, GROUP, CLIENT, offset_id, timeout=TIMEOUT)
                    seen[f"verify {pb.Code.Name(code)}"] = (
                        result.consume_result, (result.remark or "").split(":")[0],
                        result.order, result.auto_commit)
                raw.answer = False
                try:
                    await admin.consume_message_directly(broker, GROUP, CLIENT, offset_id,
                                                         timeout=TIMEOUT)
                    seen["silent"] = "answered"
                except ServerError as exc:
                    seen["silent"] = (exc.code, exc.remark.split(":")[0])
            finally:
                await raw.close()
    finally:
        await client.close()
    return seen


async def test_relayed_requests_answer_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                       namesrv: NamesrvController) -> None:
    async def create_theirs(topic: str) -> None:
        client = RemotingClient()
        try:
            await BrokerAdmin(client).create_topic(apache5.broker, TopicConfig(topic, 4, 4))
        finally:
            await client.close()

    theirs = await scenario(apache5.grpc, apache5.broker, create_theirs)
    async with running_stack(tmp_path, namesrv) as stack:
        async def create_ours(topic: str) -> None:
            await stack.create_topic(topic)

        ours = await scenario(stack.endpoint, stack.broker.addr, create_ours)
    # 5.3.3's broker hands GET_CONSUMER_RUNNING_INFO on without its decoded header, so its proxy
    # never asks the client: the broker gives up after 10 s.  Ours asks, as 5.3 means to.
    assert theirs.pop("jstack") == ResponseCode.CONSUME_MSG_TIMEOUT
    assert ours.pop("jstack") == STACK_TEXT
    assert theirs["silent"] == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    assert ours == theirs
