"""RecallMessage through Apache 5.3.3's proxy and through ours: the same answers, and the same
message withheld (opt-in, APACHE_RMQ5_HOME; tests/apache5.py starts Apache).  Apache's
messages are compared without the Java exception class they start with."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.send_cases import HEADERS, message, without_java_class
from tests.proxy.test_recall import PROXY, recall, receive, send_later

pytestmark = [needs_apache5, pytest.mark.timeout(300)]
__all__ = ["apache5"]


async def scenario(endpoint: str, broker_addr: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    client = RemotingClient()
    admin = BrokerAdmin(client)
    try:
        await admin.create_topic(broker_addr, TopicConfig("Later", 4, 4),
                                 attributes={"+message.type": "DELAY"})
        await admin.create_topic(broker_addr, TopicConfig("Now", 4, 4))
        async with grpc.aio.insecure_channel(endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            for _ in range(50):  # the topics' types reach the proxy
                probe = await stub.SendMessage(spb.SendMessageRequest(messages=[
                    message("Later", delivery_in_ms=60_000)]), metadata=HEADERS, timeout=10)
                if probe.status.code == pb.OK:
                    break
                await asyncio.sleep(0.2)
            first = await send_later(stub, b"x", 60_000)
            seen["handle fields"] = base64.urlsafe_b64decode(
                first.recall_handle).decode().split(" ")[0:2]

            def status(answer: spb.RecallMessageResponse) -> tuple[str, str]:
                return (pb.Code.Name(answer.status.code),
                        without_java_class(answer.status.message))
            seen["recall off"] = status(await recall(stub, first.recall_handle))
            await admin.update_broker_config(broker_addr, {"recallMessageEnable": "true"})
            seen["recall on"] = status(await recall(stub, first.recall_handle))
            seen["not DELAY"] = status(await recall(stub, first.recall_handle, "Now"))
            seen["bad handle"] = status(await recall(stub, "garbage!!"))
            other = base64.urlsafe_b64encode(
                f"v1 Later elsewhere {int(time.time() * 1000) + 9000} X".encode()).decode()
            seen["another broker"] = status(await recall(stub, other))
            await send_later(stub, b"kept", 2_000)
            gone = await send_later(stub, b"gone", 2_000)
            seen["recall gone"] = status(await recall(stub, gone.recall_handle))
            seen["received"] = await receive(stub, int(time.time() * 1000) + 6_000)
    finally:
        await client.close()
    return seen


async def test_recall_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                      namesrv: NamesrvController) -> None:
    theirs = await scenario(apache5.grpc, apache5.broker)
    async with running_stack(tmp_path, namesrv, PROXY) as stack:
        ours = await scenario(stack.endpoint, stack.broker.addr)
    assert theirs["received"] == [b"kept"]
    assert ours == theirs
