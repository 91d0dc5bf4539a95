"""Tag and SQL92 filters of ReceiveMessage through Apache 5.3.3's proxy and through ours, with
the broker's `enablePropertyFilter` off and on (opt-in, APACHE_RMQ5_HOME): the same codes and
the same messages for each expression (the same on both with either setting: a 5.x receive's
SQL92 is evaluated whatever enablePropertyFilter says)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.apache5 import needs_apache5, running_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.differential import routed, topic_creator
from tests.proxy.test_receive_rules import Client, headers

pytestmark = [needs_apache5, pytest.mark.timeout(900)]

#: (tag, user properties) of the messages sent, in order.
SENT = (("A", {"a": "1"}), ("B", {"a": "2"}), ("", {"a": "3", "b": "x"}), ("A", {}))
EXPRESSIONS = (
    (pb.TAG, "*"), (pb.TAG, "A"), (pb.TAG, "A||B"), (pb.TAG, "C"), (pb.TAG, " A || B "),
    (pb.SQL, "a > 1"), (pb.SQL, "a IS NULL"), (pb.SQL, "TAGS = 'A'"), (pb.SQL, "b = 'x'"),
    (pb.SQL, "a BETWEEN 1 AND 2"), (pb.SQL, "a >"), (pb.SQL, "TRUE"),
)


async def scenario(endpoint: str, broker: str) -> dict[str, Any]:
    tag = f"{time.time_ns() % 10**9:09d}"
    create = topic_creator(broker)
    seen: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(endpoint) as channel:
        client = Client(service_pb2_grpc.MessagingServiceStub(channel), endpoint,
                        lambda t: create(t, 1, None))
        topic = f"Filters{tag}"
        await create(topic, 1, None)
        await routed(client.stub, topic)
        for n, (msg_tag, props) in enumerate(SENT):
            msg = pb.Message(topic=pb.Resource(name=topic), body=str(n).encode(),
                             user_properties=props)
            msg.system_properties.message_id = f"01F1LTER{time.time_ns():020X}"
            if msg_tag:
                msg.system_properties.tag = msg_tag
            sent = await client.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                                 metadata=headers(), timeout=10)
            assert sent.status.code == pb.OK, sent.status
        for k, (kind, text) in enumerate(EXPRESSIONS):
            group = f"FilterGroup{k}x{tag}"  # a group of its own: every message for it
            client_id = f"filters-{k}-{tag}"
            telemetry = await client.settings(client_id, group=group, topic=topic)
            got = await client.receive(8, topic=topic, group=group, client_id=client_id,
                                       polling_ms=5000, expression=pb.FilterExpression(
                                           type=kind, expression=text))
            status = got.status.message if got.status and got.code != pb.OK else ""
            # docs/proxy.md "What differs": 5.3.3 starts some messages with a Java class
            status = status.removeprefix("org.apache.rocketmq.proxy.common.ProxyException: ")
            seen[f"{pb.FilterType.Name(kind)} {text!r}"] = (
                got.code, status, sorted(m.body.decode() for m in got.messages))
            await telemetry.done_writing()
    return seen


@pytest.mark.parametrize("property_filter", [False, True])
async def test_filters_as_apache_5_3_3(tmp_path: Path, namesrv: NamesrvController,
                                       property_filter: bool) -> None:
    line = f"enablePropertyFilter={'true' if property_filter else 'false'}"
    (tmp_path / "apache").mkdir()
    # started off the event loop: its boot check runs the mqadmin CLI, which runs a loop
    cluster = running_apache5(tmp_path / "apache", [line])
    apache = await asyncio.to_thread(cluster.__enter__)
    try:
        theirs = await scenario(apache.grpc, apache.broker)
    finally:
        await asyncio.to_thread(cluster.__exit__, None, None, None)
    (tmp_path / "ours").mkdir()
    async with running_stack(tmp_path / "ours", namesrv,
                             enable_property_filter=property_filter) as stack:
        ours = await scenario(stack.endpoint, stack.broker.addr)
    print("ours", ours, "\ntheirs", theirs)
    assert ours == theirs
