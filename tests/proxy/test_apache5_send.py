"""SendMessage at and beyond the limits, through Apache 5.3.3's proxy and through ours: the same
codes and messages (opt-in, APACHE_RMQ5_HOME; tests/apache5.py starts Apache).  Apache's
messages are compared without the Java exception class some of them start with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.send_cases import CASES, CHANNEL_OPTIONS, TOPICS, answers, expected

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
