"""An Apache RocketMQ 5.3.3 name server and broker with its gRPC proxy in local mode, as
processes (opt-in: needs the build named by APACHE_RMQ5_HOME, see docs/benchmark-apache.md):
our 5.x pieces are checked against the real thing."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mqadmin.cli import invoke
from tests.ports import free_port

HOME = os.environ.get("APACHE_RMQ5_HOME", "")
needs_apache5 = pytest.mark.skipif(
    not (HOME and Path(HOME, "mqbroker.sh").is_file()),
    reason="needs APACHE_RMQ5_HOME (the Apache 5.3.3 build)")
CLUSTER = "Apache5Cluster"
BROKER = "apache5-a"
BOOT_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Apache5:
    ns: str
    broker: str
    grpc: str


def _start(args: list[str], log: Path, home: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "JAVA_OPT_EXT": f"-Duser.home={home}",
                                     "RMQ_HEAP": "-Xms256m -Xmx384m"})


def _until_registered(ns: str, procs: list[subprocess.Popen[bytes]], root: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                logs = {p.name: p.read_text(errors="replace")[-2000:] for p in root.glob("*.out")}
                raise AssertionError(f"an Apache process exited: {logs}")
        # the name servers' table (clusterList also asks the broker, which may want a signature)
        listed = invoke("topicClusterList", "-n", ns, "-t", "TBW102", "-o", "json")
        if listed.exit_code == 0 and CLUSTER in listed.stdout:
            return
        time.sleep(0.5)
    raise AssertionError(f"Apache 5.3.3 did not register within {BOOT_TIMEOUT} s")


@contextlib.contextmanager
def running_apache5(root: Path, broker_lines: Sequence[str] = (), *,
                    proxy: bool = True) -> Iterator[Apache5]:
    """Name server, broker (its config `broker_lines` added) and, with `proxy`, its gRPC
    proxy (local mode) under `root`; stopped on exit."""
    home = root / "home"
    home.mkdir()
    ns_port, broker_port, grpc_port, remoting_port = (free_port(), free_port(), free_port(),
                                                      free_port())
    ns = f"127.0.0.1:{ns_port}"
    (root / "ns.conf").write_text(f"listenPort={ns_port}\n")
    (root / "broker.conf").write_text("\n".join([
        f"brokerClusterName={CLUSTER}", f"brokerName={BROKER}", "brokerId=0",
        f"listenPort={broker_port}", "brokerIP1=127.0.0.1", f"namesrvAddr={ns}",
        f"storePathRootDir={root / 'store'}", "autoCreateTopicEnable=true",
        "autoCreateSubscriptionGroup=true", *broker_lines, ""]))
    (root / "proxy.json").write_text(
        f'{{"rocketMQClusterName":"{CLUSTER}","namesrvAddr":"{ns}",'
        f'"grpcServerPort":{grpc_port},"remotingListenPort":{remoting_port}}}')
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start([f"{HOME}/mqnamesrv.sh", "-c", str(root / "ns.conf")],
                            root / "ns.out", home))
        with_proxy = ["--enable-proxy", "-pc", str(root / "proxy.json")] if proxy else []
        procs.append(_start([f"{HOME}/mqbroker.sh", "-n", ns, "-c", str(root / "broker.conf"),
                             *with_proxy], root / "broker.out", home))
        _until_registered(ns, procs, root)
        yield Apache5(ns, f"127.0.0.1:{broker_port}", f"127.0.0.1:{grpc_port}")
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def apache5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apache5]:
    """Name server, broker and gRPC proxy (local mode); stopped after the module."""
    with running_apache5(tmp_path_factory.mktemp("apache5")) as cluster:
        yield cluster


@contextlib.contextmanager
def running_apache5_slave(cluster: Apache5, root: Path) -> Iterator[str]:
    """A slave (brokerId 1) of `cluster`'s broker under `root`; its address; stopped on exit."""
    home = root / "home"
    home.mkdir()
    port = free_port()
    (root / "broker.conf").write_text("\n".join([
        f"brokerClusterName={CLUSTER}", f"brokerName={BROKER}", "brokerId=1",
        "brokerRole=SLAVE", f"listenPort={port}", "brokerIP1=127.0.0.1",
        f"namesrvAddr={cluster.ns}", f"storePathRootDir={root / 'store'}", ""]))
    proc = _start([f"{HOME}/mqbroker.sh", "-n", cluster.ns, "-c", str(root / "broker.conf")],
                  root / "broker.out", home)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
