"""`mqnamesrv` as a real process: -p, config errors, port in use, start and SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from engine.common import properties
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.remoting.client import RemotingClient


def write_conf(tmp_path: Path, **extra: str) -> Path:
    conf = {
        "listenPort": "0",
        "kvConfigPath": str(tmp_path / "ns" / "kvConfig.json"),
        "logsDir": str(tmp_path / "logs"),
        "bindAddress": "127.0.0.1",
        **extra,
    }
    path = tmp_path / "namesrv.conf"
    path.write_text(properties.dumps(conf.items()))
    return path


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "ROCKETMQ_HOME": str(tmp_path)}


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.namesrv.main", *args],
                          capture_output=True, text=True, env=env(tmp_path), timeout=60)


def test_print_config(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, orderMessageEnable="true", someFutureKey="x")
    done = run(tmp_path, "-c", str(conf), "-p")
    assert done.returncode == 0, done.stderr
    printed = properties.loads(done.stdout)
    assert printed["orderMessageEnable"] == "true"
    assert printed["listenPort"] == "0"
    assert printed["configStorePath"] == str(conf)  # -c file becomes configStorePath
    assert printed["someFutureKey"] == "x"
    assert "unknown config key 'someFutureKey'" in done.stderr

    defaults = run(tmp_path, "-p")
    assert defaults.returncode == 0
    assert properties.loads(defaults.stdout)["listenPort"] == "9876"
    assert properties.loads(defaults.stdout)["kvConfigPath"] == str(
        tmp_path / "namesrv" / "kvConfig.json")


def test_bad_config_is_one_line_error(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, listenPort="98x76")
    done = run(tmp_path, "-c", str(conf))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "mqnamesrv: error: config key 'listenPort': '98x76' is not an integer")
    assert "Traceback" not in done.stderr
    missing = run(tmp_path, "-c", str(tmp_path / "absent.conf"))
    assert missing.returncode == 1 and "cannot read config file" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(tmp_path, "-c", str(write_conf(tmp_path, listenPort=str(port))))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2  # "load config properties file OK", then the error
    assert lines[-1].startswith("mqnamesrv: error: port ") and "already in use" in lines[-1]


async def test_serves_then_stops_on_sigterm(tmp_path: Path) -> None:
    conf = write_conf(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine.namesrv.main", "-c", str(conf),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env(tmp_path))
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("The Name Server boot success."), line
        port = int(line.rsplit("port=", 1)[1])
        client = RemotingClient()
        try:
            resp = await client.invoke(f"127.0.0.1:{port}", request(
                RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}))
            assert resp.code == 0
        finally:
            await client.close()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    kv = json.loads((tmp_path / "ns" / "kvConfig.json").read_text())
    assert kv == {"configTable": {"NS": {"k": "v"}}}
    assert (tmp_path / "logs" / "namesrv.log").exists()


def test_corrupt_kv_config_is_one_line_error(tmp_path: Path) -> None:
    conf = write_conf(tmp_path)
    kv = tmp_path / "ns" / "kvConfig.json"
    kv.parent.mkdir()
    kv.write_text("{broken")
    done = run(tmp_path, "-c", str(conf))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"mqnamesrv: error: {kv} is not")
    assert "Traceback" not in done.stderr
    assert kv.read_text() == "{broken"  # a failed start must not overwrite it
