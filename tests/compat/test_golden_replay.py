"""Every request frame captured from the Java and C++ clients gets a well-formed answer."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.frame import FrameDecoder
from tests.broker.conftest import broker_configs
from tests.conftest import namesrv_config
from tests.protocol.golden import golden_frames

NAMESRV_PORT, BROKER_PORT = 19876, 20911  # the ports the captures were taken on
CRASH = re.compile(r"^[A-Z]\w*(Error|Exception)\b")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvController, BrokerController]]:
    ns = NamesrvController(namesrv_config(tmp_path))
    await ns.start()
    # Replayed pulls would each be held for their captured suspend timeout: poll briefly.
    config, store = broker_configs(tmp_path, f"127.0.0.1:{ns.port}", name="stub-broker",
                                   long_polling_enable=False, short_polling_time_mills=10)
    broker = BrokerController(config, store)
    await broker.start()
    await broker.registration.register_all()
    try:
        yield ns, broker
    finally:
        await broker.stop()
        await ns.stop()


async def replay(port: int, frame: bytes, oneway: bool) -> RemotingCommand | None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        if oneway:
            return None
        decoder = FrameDecoder()
        while True:
            data = await asyncio.wait_for(reader.read(65536), 20)
            assert data, "connection closed without an answer"
            # Skip requests the broker sends first (NOTIFY_CONSUMER_IDS_CHANGED on a heartbeat).
            answers = [c for c in decoder.feed(data) if c.is_response]
            if answers:
                return answers[0]
    finally:
        writer.close()


async def test_golden_requests_get_well_formed_answers(
        cluster: tuple[NamesrvController, BrokerController], golden_dir: Path) -> None:
    ns, broker = cluster
    codes: Counter[tuple[int, int]] = Counter()
    for g in golden_frames(golden_dir):
        if g.header["flag"] & 1:
            continue  # a response the capture saw going the other way
        port = {NAMESRV_PORT: ns.port, BROKER_PORT: broker.port}.get(g.listen)
        assert port is not None
        oneway = bool(g.header["flag"] & 2)
        answer = await replay(port, g.frame, oneway)
        if answer is None:
            continue
        assert answer.is_response and answer.opaque == g.header["opaque"], (g.source, g.line)
        assert answer.code in set(ResponseCode), (g.source, g.line, answer.code)
        assert answer.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED, (g.source, g.line)
        codes[(g.header["code"], answer.code)] += 1
        # Refusals name the problem; a crashed handler would answer "SomeError: ...".
        assert not CRASH.match(answer.remark or ""), (g.source, g.line, answer.remark)
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                 RequestCode.SEND_BATCH_MESSAGE, RequestCode.HEART_BEAT,
                 RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.LOCK_BATCH_MQ,
                 RequestCode.QUERY_CONSUMER_OFFSET):
        assert codes[(code, ResponseCode.SUCCESS)] > 0, code


