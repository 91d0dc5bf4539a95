"""The proxy as a process: `mqbroker --enable-proxy -pc` (local mode) and `mqproxy` (cluster)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import ClientError
from engine.client.core.namesrv import NamesrvAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.broker.test_main import env, write_conf
from tests.proxy.conftest import FRONT, in_thread
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer

STARTUP_S = 60
#: A user topic (5.3.3's proxy refuses system topics such as TBW102: ILLEGAL_TOPIC).
TOPIC = "ProcessTopic"


def proxy_json(tmp_path: Path, **settings: object) -> Path:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(json.dumps({"grpcServerPort": 0, "grpcFront": FRONT, **settings}))
    return path


async def send_one(endpoint: str, topic: str) -> str:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = topic, b"through the process"
        receipt = await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    return str(receipt.message_id)


async def create_topic(ns: str) -> None:
    """TOPIC on the one broker the name server at `ns` knows, once it routes it."""
    admin = NamesrvAdmin(ns)
    client = RemotingClient()
    try:
        for _ in range(100):
            brokers = (await admin.cluster_info()).broker_addr_table.values()
            addrs = [a for a in (b.master_addr() for b in brokers) if a]
            if addrs:
                break
            await asyncio.sleep(0.05)
        (addr,) = addrs
        await BrokerAdmin(client).create_topic(addr, TopicConfig(TOPIC, 4, 4))
        for _ in range(100):  # the broker registers the new topic in the background
            try:
                await admin.topic_route(TOPIC)
                return
            except ClientError:
                await asyncio.sleep(0.05)
    finally:
        await client.close()
        await admin.close()


async def serve_until_line(args: list[str], tmp_path: Path, marker: str
                           ) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env(tmp_path))
    assert proc.stdout is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP_S)).decode()
        assert line, "the process ended before announcing " + marker
        if marker in line:
            return proc, line


async def test_broker_with_enable_proxy_serves_grpc_clients(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    conf = write_conf(tmp_path, namesrvAddr=f"127.0.0.1:{namesrv.port}",
                      autoCreateTopicEnable="true")
    pc = proxy_json(tmp_path, grpcThreadPoolNums=4, notAKey=1)
    proc, line = await serve_until_line(
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(pc)], tmp_path, "gRPC proxy boot success")
    try:
        endpoint = line.rsplit(" ", 1)[1].strip()
        assert endpoint.startswith("127.0.0.1:")
        await create_topic(f"127.0.0.1:{namesrv.port}")
        assert await send_one(endpoint, TOPIC)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), STARTUP_S) == 0
        assert proc.stderr is not None
        errors = (await proc.stderr.read()).decode()
        assert "unknown proxy config key 'notAKey'" in errors
        assert "proxy config key 'grpcThreadPoolNums' is not used" in errors
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_proxy_config_errors_stop_the_broker(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, namesrvAddr="127.0.0.1:9")
    bad = proxy_json(tmp_path, grpcServerPort="eighty")
    run = [sys.executable, "-m", "engine.broker.main", "-c", str(conf)]
    done = subprocess.run([*run, "--enable-proxy", "-pc", str(bad)], capture_output=True,
                          text=True, env=env(tmp_path), timeout=60)
    assert done.returncode == 1
    assert "grpcServerPort" in done.stderr
    done = subprocess.run([*run, "-pc", str(bad)], capture_output=True, text=True,
                          env=env(tmp_path), timeout=60)
    assert done.returncode == 1
    assert "-pc needs --enable-proxy" in done.stderr


async def test_mqproxy_fronts_the_brokers_of_a_name_server(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    async with running_broker(tmp_path, namesrv, auto_create_topic_enable=True):
        pc = proxy_json(tmp_path)
        proc, line = await serve_until_line(
            [sys.executable, "-m", "engine.proxy.main", "-pc", str(pc), "-n", ns,
             "--logs-dir", str(tmp_path / "logs")], tmp_path, "proxy boot success")
        try:
            endpoint = line.split("gRPC endpoint ")[1].split(",")[0]
            port = endpoint.rsplit(":", 1)[1]
            await create_topic(ns)
            assert await send_one(f"127.0.0.1:{port}", TOPIC)
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), STARTUP_S) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def test_mqproxy_needs_a_name_server(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "engine.proxy.main", "-pc",
                           str(proxy_json(tmp_path))], capture_output=True, text=True,
                          env=env(tmp_path), timeout=60)
    assert done.returncode == 1
    assert "no name server address" in done.stderr


async def test_broker_stops_promptly_with_a_grpc_client_connected(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    """The client's Telemetry stream stays open; SIGTERM still ends the broker in seconds
    (`mqadmin dev down` SIGKILLs after 10 s)."""
    conf = write_conf(tmp_path, namesrvAddr=f"127.0.0.1:{namesrv.port}")
    proc, line = await serve_until_line(
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(proxy_json(tmp_path))], tmp_path, "gRPC proxy boot success")
    endpoint = line.rsplit(" ", 1)[1].strip()
    await create_topic(f"127.0.0.1:{namesrv.port}")
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    try:
        await in_thread(producer.startup)
        assert await in_thread(producer._init_settings_event.wait, 10)  # the stream is open
        started = asyncio.get_running_loop().time()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), STARTUP_S) == 0
        assert asyncio.get_running_loop().time() - started < 8
    finally:
        await in_thread(producer.shutdown)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
