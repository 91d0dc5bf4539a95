"""The Apache C++ client sends through our name server to our broker and consumes back."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from tests.broker.conftest import broker_configs
from tests.compat.test_cpp_namesrv import pytestmark as cpp_available
from tests.conftest import namesrv_config

pytestmark = cpp_available
DRIVER = Path(__file__).with_name("cpp_client.py")
COUNT = 10


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvController, BrokerController]]:
    ns = NamesrvController(namesrv_config(tmp_path))
    await ns.start()
    config, store = broker_configs(tmp_path, f"127.0.0.1:{ns.port}")
    broker = BrokerController(config, store)
    await broker.start()
    broker.state.topics.put(TopicConfig("CppTopic", 4, 4))
    await broker.registration.register_all()
    try:
        yield ns, broker
    finally:
        await broker.stop()
        await ns.stop()


async def run_driver(tmp_path: Path, *args: str) -> list[dict[str, object]]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(DRIVER), *args, env={**os.environ, "HOME": str(home)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{lines}\n{err.decode()[-3000:]}"
    return lines


def expected(mode: str) -> list[dict[str, str]]:
    return [{"body": f"cpp-{mode}-{i}", "tags": f"Tag{i % 2}", "keys": f"key-{i}",
             "seq": str(i), "topic": "CppTopic"} for i in range(COUNT)]


def received(lines: list[dict[str, object]]) -> list[dict[str, str]]:
    records = [r["received"] for r in lines if isinstance(r.get("received"), dict)]
    return sorted(records, key=lambda r: (len(r["body"]), r["body"]))  # type: ignore[index]


async def test_cpp_send_modes_then_push_and_pull_consume(
        cluster: tuple[NamesrvController, BrokerController], tmp_path: Path) -> None:
    ns, broker = cluster
    addr = f"127.0.0.1:{ns.port}"
    for mode in ("sync", "async", "oneway"):
        lines = await run_driver(tmp_path, "produce", addr, "CppTopic", str(COUNT), mode)
        assert sum(1 for r in lines if "sent" in r) == COUNT
        if mode == "sync":
            assert all(r["status"] == 0 for r in lines if "sent" in r)
    total = sum(broker.state.store.get_max_offset_in_queue("CppTopic", q) for q in range(4))
    assert total == 3 * COUNT

    want = sorted(expected("sync") + expected("async") + expected("oneway"),
                  key=lambda r: (len(r["body"]), r["body"]))
    pushed = await run_driver(tmp_path, "push", addr, "CppTopic", "CppPushGroup",
                              str(3 * COUNT))
    assert received(pushed) == want
    pulled = await run_driver(tmp_path, "pull", addr, "CppTopic", "CppPullGroup",
                              str(3 * COUNT))
    assert received(pulled) == want
