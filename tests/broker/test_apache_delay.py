"""Delay levels against Apache 4.9.8's and 5.3.3's brokers: what a delivered delayed message, a
retry and a dead letter keep of DELAY, REAL_TOPIC and REAL_QID (opt-in: APACHE_RMQ_HOME and/or
APACHE_RMQ5_HOME; each Apache is compared where it is available).  Real time: level 1 is 1 s."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.client.broker_admin import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.message import MessageRecord, decode_records
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.mqadmin.apache_cluster import ApacheCluster, apache, needs_apache

from .conftest import running_broker
from .helpers import pull_request, send_request

__all__ = ["apache", "apache5"]
pytestmark = pytest.mark.timeout(300)

TOPIC, GROUP = "DelayedKeep", "DelayedGroup"
KEPT = ("DELAY", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC")


async def _first(client: RemotingClient, addr: str, topic: str) -> MessageRecord:
    for _ in range(150):  # delivered after its level's 1 s (the schedule runs every 100 ms)
        resp = await client.invoke(addr, pull_request(topic, 0, 0, group=GROUP))
        if resp.code == ResponseCode.SUCCESS:
            return decode_records(resp.body or b"")[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"nothing reached {topic}")


def _kept(record: MessageRecord) -> dict[str, str | None]:
    props = record.properties()
    return {key: props.get(key) for key in KEPT}


async def scenario(addr: str) -> dict[str, dict[str, str | None]]:
    client = RemotingClient()
    try:
        await BrokerAdmin(client).create_topic(addr, TopicConfig(TOPIC, 1, 1))
        sent = await client.invoke(addr, send_request(TOPIC, b"d", extra={"DELAY": "1"}))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        delivered = await _first(client, addr, TOPIC)
        seen = {"delivered": _kept(delivered)}
        for level, topic in ((1, f"%RETRY%{GROUP}"), (-1, f"%DLQ%{GROUP}")):
            header = ConsumerSendMsgBackRequestHeader(
                offset=delivered.physical_offset, group=GROUP, delay_level=level,
                origin_msg_id=delivered.msg_id, origin_topic=TOPIC)
            back = await client.invoke(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                     to_ext(header)))
            assert back.code == ResponseCode.SUCCESS, back.remark
            seen[topic.split("%")[1]] = _kept(await _first(client, addr, topic))
        return seen
    finally:
        await client.close()


async def ours(tmp_path: Path, namesrv: NamesrvController) -> dict[str, dict[str, str | None]]:
    async with running_broker(tmp_path, namesrv) as broker:
        return await scenario(broker.addr)


@needs_apache
async def test_as_apache_4_9_8(apache: ApacheCluster, tmp_path: Path,
                               namesrv: NamesrvController) -> None:
    theirs = await scenario(apache.master)
    assert theirs["delivered"]["DELAY"] == "1"
    assert await ours(tmp_path, namesrv) == theirs


@needs_apache5
async def test_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                               namesrv: NamesrvController) -> None:
    theirs = await scenario(apache5.broker)
    assert theirs["delivered"]["DELAY"] == "1"
    assert await ours(tmp_path, namesrv) == theirs
