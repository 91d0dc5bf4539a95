"""4.x remoting sends at the size limits, to Apache 4.9.8's broker, Apache 5.3.3's and ours: the
same codes and remarks (opt-in: APACHE_RMQ_HOME and/or APACHE_RMQ5_HOME; each Apache is
compared where it is available)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.mqadmin.apache_cluster import ApacheCluster, apache, needs_apache

from .conftest import running_broker
from .helpers import send_request

__all__ = ["apache", "apache5"]
pytestmark = pytest.mark.timeout(300)

MIB4 = 4 * 1024 * 1024
TOPIC = "LimitsTopic"
Answers = dict[str, tuple[int, str]]


async def answers(addr: str) -> Answers:
    """Each case's (code, remark), the remark only when the send is refused."""
    client = RemotingClient()
    try:
        await BrokerAdmin(client).create_topic(addr, TopicConfig(TOPIC, 4, 4))
        cases = {
            "4 MiB body, 16 KiB of properties": send_request(
                TOPIC, b"b" * MIB4, extra={"big": "v" * (16 * 1024)}),
            "4 MiB + 1 body": send_request(TOPIC, b"b" * (MIB4 + 1)),
            "40,000-character property": send_request(TOPIC, b"p", extra={"big": "v" * 40_000}),
        }
        out: Answers = {}
        for name, cmd in cases.items():
            resp = await client.invoke(addr, cmd, 30)
            out[name] = (resp.code, "" if resp.code == ResponseCode.SUCCESS else resp.remark or "")
        return out
    finally:
        await client.close()


async def ours(tmp_path: Path, namesrv: NamesrvController) -> Answers:
    async with running_broker(tmp_path, namesrv,
                              mapped_file_size_commit_log=16 * 1024 * 1024) as broker:
        return await answers(broker.addr)


@needs_apache
async def test_as_apache_4_9_8(apache: ApacheCluster, tmp_path: Path,
                               namesrv: NamesrvController) -> None:
    theirs = await answers(apache.master)
    assert theirs["4 MiB body, 16 KiB of properties"][0] == ResponseCode.SUCCESS
    assert await ours(tmp_path, namesrv) == theirs


@needs_apache5
async def test_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                               namesrv: NamesrvController) -> None:
    theirs = await answers(apache5.broker)
    assert theirs["4 MiB body, 16 KiB of properties"][0] == ResponseCode.SUCCESS
    assert await ours(tmp_path, namesrv) == theirs
