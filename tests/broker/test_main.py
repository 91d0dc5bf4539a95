"""`mqbroker` as a real process: -p, config errors, port in use, serve and SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from engine.common import properties
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.remoting.client import RemotingClient


def write_conf(tmp_path: Path, **extra: str) -> Path:
    conf = {"brokerName": "broker-x", "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
            "listenPort": "0", "storePathRootDir": str(tmp_path / "store"),
            "logsDir": str(tmp_path / "logs"), "mapedFileSizeCommitLog": "1048576", **extra}
    path = tmp_path / "broker.conf"
    path.write_text(properties.dumps(conf.items()))
    return path


def cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine.broker.main", *args]


def env(tmp_path: Path) -> dict[str, str]:
    return {k: v for k, v in {**os.environ, "HOME": str(tmp_path)}.items()
            if k != "NAMESRV_ADDR"}


def test_print_config_merges_broker_and_store_keys(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, flushDiskType="SYNC_FLUSH", futureKey="1")
    done = subprocess.run(cmd("-c", str(conf), "-n", "127.0.0.1:9999", "-p"),
                          capture_output=True, text=True, env=env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    printed = properties.loads(done.stdout)
    assert printed["brokerName"] == "broker-x"
    assert printed["brokerIP1"] == "127.0.0.1"
    assert printed["namesrvAddr"] == "127.0.0.1:9999"
    assert printed["flushDiskType"] == "SYNC_FLUSH"
    assert printed["mappedFileSizeCommitLog"] == "1048576"
    assert "unknown config key 'futureKey'" in done.stderr
    assert printed["metricsExporterType"] == "DISABLE"
    assert printed["metricsPromExporterHost"] == ""
    assert printed["metricsPromExporterPort"] == "5557"


def test_bad_values_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, str] | None, str]] = [
        ({"listenPort": "ten"}, "listenPort"),
        ({"flushDiskType": "SOMETIMES"}, "flushDiskType"),
        ({"metricsExporterType": "GRAPHITE"}, "metricsExporterType"),
        ({"metricsPromExporterPort": "x"}, "metricsPromExporterPort"),
        (None, "cannot read"),
    ]
    for extra, message in cases:
        conf = write_conf(tmp_path, **extra) if extra else tmp_path / "missing.conf"
        done = subprocess.run(cmd("-c", str(conf)), capture_output=True, text=True,
                              env=env(tmp_path), timeout=60)
        assert done.returncode == 1
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(cmd("-c", str(write_conf(tmp_path, listenPort=str(port)))),
                              capture_output=True, text=True, env=env(tmp_path), timeout=60)
    assert done.returncode == 1
    assert f"port {port}" in done.stderr and "already in use" in done.stderr
    assert "Traceback" not in done.stderr


def test_metrics_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = write_conf(tmp_path, metricsExporterType="PROM",
                          metricsPromExporterHost="127.0.0.1", metricsPromExporterPort=str(port))
        done = subprocess.run(cmd("-c", str(conf)), capture_output=True, text=True,
                              env=env(tmp_path), timeout=60)
    assert done.returncode == 1
    [error] = [line for line in done.stderr.splitlines() if "error" in line]
    assert f"metrics port {port}" in error and "metricsPromExporterPort" in error
    assert "Traceback" not in done.stderr


async def test_serves_registers_and_stops_on_sigterm(tmp_path: Path,
                                                     namesrv: NamesrvController) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    conf = write_conf(tmp_path, namesrvAddr=ns)
    proc = await asyncio.create_subprocess_exec(
        *cmd("-c", str(conf)), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env(tmp_path))
    client = RemotingClient()
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "boot success" in line, line
        addr = line.split("[broker-x, ")[1].split("]")[0]
        route = await client.invoke(ns, request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info = fastjson.loads(route.body or b"{}")
        assert info["brokerAddrTable"]["broker-x"]["brokerAddrs"] == {0: addr}
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        gone = await client.invoke(ns, request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert fastjson.loads(gone.body or b"{}")["brokerAddrTable"] == {}  # unregistered
        assert not (tmp_path / "store" / "abort").exists()  # clean shutdown
        assert (tmp_path / "store" / "config" / "topics.json").exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await client.close()
