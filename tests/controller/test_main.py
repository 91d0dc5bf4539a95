"""`mqcontroller -c` and `mqnamesrv` with `enableControllerInNamesrv=true`, as real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

from engine.common import properties
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.remoting.client import RemotingClient


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def write_conf(path: Path, **conf: str) -> Path:
    path.write_text(properties.dumps(conf.items()))
    return path


async def serve_and_ask(tmp_path: Path, module: str, conf: Path, ready: str, addr: str) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "ROCKETMQ_HOME": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, "-c", str(conf), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith(ready), line
        client = RemotingClient()
        try:
            answer = await client.invoke(addr, request(RequestCode.CONTROLLER_GET_METADATA_INFO),
                                         10.0)
            assert (answer.ext("controllerLeaderId"), answer.ext("isLeader"),
                    answer.ext("controllerLeaderAddress")) == ("n0", "true", addr)
        finally:
            await client.close()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_mqcontroller_serves_on_its_peer_address(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path / "controller.conf", controllerDLegerGroup="group1",
                      controllerDLegerPeers=f"n0-{addr}", controllerDLegerSelfId="n0",
                      controllerStorePath=str(tmp_path / "store"), bindAddress="127.0.0.1",
                      logsDir=str(tmp_path / "logs"))
    await serve_and_ask(tmp_path, "engine.controller.main", conf,
                        "The ControllerManager boot success.", addr)
    assert (tmp_path / "logs" / "controller.log").exists()


async def test_name_server_embeds_a_controller(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path / "namesrv.conf", listenPort="0", bindAddress="127.0.0.1",
                      kvConfigPath=str(tmp_path / "ns" / "kv.json"),
                      logsDir=str(tmp_path / "logs"), enableControllerInNamesrv="true",
                      controllerDLegerGroup="group1", controllerDLegerPeers=f"n0-{addr}",
                      controllerDLegerSelfId="n0",
                      controllerStorePath=str(tmp_path / "store"))
    await serve_and_ask(tmp_path, "engine.namesrv.main", conf, "The Name Server boot success.",
                        addr)


def test_bad_peers_are_a_one_line_error(tmp_path: Path) -> None:
    import subprocess

    conf = write_conf(tmp_path / "c.conf", controllerDLegerPeers="n0-nohostport",
                      controllerDLegerSelfId="n0", logsDir=str(tmp_path / "logs"))
    done = subprocess.run([sys.executable, "-m", "engine.controller.main", "-c", str(conf)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("mqcontroller: error: "
                                                           "controllerDLegerPeers")
