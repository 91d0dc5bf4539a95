"""SendMessage at and beyond the limits, through Apache 5.3.3's proxy and through ours: the same
codes and messages (opt-in, APACHE_RMQ5_HOME; tests/apache5.py starts Apache).  Apache's
messages are compared without the Java exception class some of them start with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.client.errors import ClientError
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.message import MessageRecord
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.send_cases import (
    CASES,
    CHANNEL_OPTIONS,
    HEADERS,
    TOPICS,
    answers,
    expected,
    message,
)

pytestmark = [needs_apache5, pytest.mark.timeout(300)]
__all__ = ["apache5"]


async def _ask(endpoint: str) -> dict[str, tuple[str, str]]:
    async with grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) as channel:
        return await answers(service_pb2_grpc.MessagingServiceStub(channel), list(CASES))


async def test_sends_are_answered_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                   namesrv: NamesrvController) -> None:
    client = RemotingClient()
    try:
        for topic, kind in TOPICS.items():
            await BrokerAdmin(client).create_topic(
                apache5.broker, TopicConfig(topic, 4, 4),
                attributes={"+message.type": kind} if kind else None)
    finally:
        await client.close()
    await asyncio.sleep(1)  # Apache's proxy reads the new topics' types from its broker
    theirs = await _ask(apache5.grpc)
    async with running_stack(tmp_path, namesrv,
                             mapped_file_size_commit_log=16 * 1024 * 1024) as stack:
        for topic, kind in TOPICS.items():
            await stack.create_topic(topic, 4, kind)
        ours = await _ask(stack.endpoint)
    assert theirs == expected(list(CASES))  # what send_cases.py records is Apache's answer
    assert ours == theirs


#: Added by 5.3.3's broker to whatever it stores (not by its proxy); this broker does not.
BROKER_ADDED = ("MSG_REGION", "TRACE_ON")


async def _stored_properties(endpoint: str, broker_addr: str) -> dict[str, dict[str, str]]:
    """The stored properties of a bare message (id and body only) and of a full one."""
    bare = message("SdNormal", b"bare", message_id="01B0000000000000000000000000000A1")
    full = message("SdFifo", b"full", props={"color": "blue"}, keys=("k1", "k2"),
                   message_id="01B0000000000000000000000000000A2", tag="TagA",
                   message_group="g1", trace_context="00-trace", born_host="10.1.2.3")
    full.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_123)
    async with grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for msg in (bare, full):
            sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                          metadata=HEADERS, timeout=30)
            assert sent.status.code == pb.OK, sent.status
    client = RemotingClient()
    out: dict[str, dict[str, str]] = {}
    try:
        admin = BrokerAdmin(client)
        records: list[MessageRecord] = []
        for topic in ("SdNormal", "SdFifo"):
            for queue_id in range(4):
                offset = 0
                while True:
                    try:
                        pulled = await admin.pull_records(
                            broker_addr, MessageQueue(topic, "", queue_id), offset, max_nums=8)
                    except ClientError:
                        break
                    if not pulled.records:
                        break
                    offset = pulled.records[-1].queue_offset + 1
                    records.extend(pulled.records)
        for record in records:
            props = record.properties()
            if props.get("UNIQ_KEY") in ("01B0000000000000000000000000000A1",
                                         "01B0000000000000000000000000000A2"):
                for key in (*BROKER_ADDED, "CLUSTER"):
                    props.pop(key, None)
                host = props.get("__BORNHOST", "")
                if host.startswith("127.0.0.1:"):
                    props["__BORNHOST"] = "127.0.0.1:PORT"
                out[props["UNIQ_KEY"]] = props
    finally:
        await client.close()
    return out


async def test_stored_properties_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                 namesrv: NamesrvController) -> None:
    client = RemotingClient()
    try:
        for topic, kind in TOPICS.items():
            await BrokerAdmin(client).create_topic(
                apache5.broker, TopicConfig(topic, 4, 4),
                attributes={"+message.type": kind} if kind else None)
    finally:
        await client.close()
    await asyncio.sleep(1)
    theirs = await _stored_properties(apache5.grpc, apache5.broker)
    async with running_stack(tmp_path, namesrv) as stack:
        for topic, kind in TOPICS.items():
            await stack.create_topic(topic, 4, kind)
        ours = await _stored_properties(stack.endpoint, stack.broker.addr)
    assert len(theirs) == 2
    assert ours == theirs
