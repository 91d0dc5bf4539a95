"""The Apache C++ client (PyPI `rocketmq==0.4.4`) resolves topic routes from our name server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.namesrv import RegisterBrokerRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient

PROBE = Path(__file__).with_name("cpp_route_probe.py")


def _cpp_client_loads() -> bool:
    check = subprocess.run([sys.executable, "-c", "import rocketmq.client"],
                           capture_output=True, timeout=60)
    return check.returncode == 0


pytestmark = pytest.mark.skipif(not _cpp_client_loads(),
                                reason="the Apache C++ client (rocketmq==0.4.4) does not load here")


async def _register(client: RemotingClient, addr: str, topic: str, queues: int, *,
                    compressed: bool) -> None:
    """Register like a broker; the registration lives as long as `client`'s connection."""
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {topic: TopicConfig(topic, queues, queues)}, DataVersion(1_700_000_000_000, 1)))
    header = RegisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr="127.0.0.1:10911", cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:10912", broker_id=0, compressed=compressed)
    resp = await client.invoke(addr, request(RequestCode.REGISTER_BROKER, to_ext(header),
                                             body.encode(compressed)))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _probe(tmp_path: Path, addr: str, topic: str) -> dict[str, object]:
    env = {**os.environ, "HOME": str(tmp_path)}  # the C++ client logs under $HOME/logs
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(PROBE), addr, topic, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    assert lines, f"probe printed nothing (exit {proc.returncode}): {err.decode()[-2000:]}"
    result: dict[str, object] = json.loads(lines[-1])
    return result


@pytest.mark.parametrize("compressed", [False, True])
async def test_cpp_client_resolves_a_route(namesrv: NamesrvController, tmp_path: Path,
                                           compressed: bool) -> None:
    addr = f"127.0.0.1:{namesrv.port}"
    broker = RemotingClient()
    try:
        await _register(broker, addr, "CompatTopic", 4, compressed=compressed)
        result = await _probe(tmp_path, addr, "CompatTopic")
    finally:
        await broker.close()
    assert result.get("error") is None, result
    queues = sorted((q["brokerName"], q["queueId"]) for q in result["queues"])  # type: ignore[union-attr,index]
    assert queues == [("broker-a", i) for i in range(4)]


async def test_cpp_client_gets_no_queues_for_an_unknown_topic(namesrv: NamesrvController,
                                                              tmp_path: Path) -> None:
    result = await _probe(tmp_path, f"127.0.0.1:{namesrv.port}", "NoSuchTopic")
    assert result.get("queues") in (None, [])
