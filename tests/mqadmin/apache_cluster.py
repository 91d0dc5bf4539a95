"""An Apache RocketMQ 4.9.8 name server with a master and a slave, as processes (opt-in:
needs the Apache build named by APACHE_RMQ_HOME, see docs): the console is checked against
the real thing where only Apache shows a behaviour."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mqadmin.cli import invoke
from tests.ports import free_port

HOME = os.environ.get("APACHE_RMQ_HOME", "")
needs_apache = pytest.mark.skipif(not (HOME and Path(HOME, "env.sh").is_file()),
                                  reason="needs APACHE_RMQ_HOME (the Apache 4.9.8 build)")
CLUSTER = "ApacheCluster"
BROKER = "apache-a"
BOOT_TIMEOUT = 90.0


@dataclass(frozen=True, slots=True)
class ApacheCluster:
    ns: str
    master: str
    slave: str


def _java() -> tuple[str, list[str], str]:
    """The JVM, the options 4.9.8 needs on it and the classpath, from the build's env.sh."""
    out = subprocess.run(["bash", "-c", f'. "{HOME}/env.sh" && printf "%s\\n%s\\n%s" '
                          '"$JAVA" "$RMQ_COMMON_OPTS" "$RMQ_CP"'],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    return out[0], shlex.split(out[1]), out[2]


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "ROCKETMQ_HOME": HOME})


def _until_booted(log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        if "boot success" in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{log.name} exited: {log.read_text(errors='replace')}")
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: no boot within {BOOT_TIMEOUT} s")


def _first_message(ns: str) -> None:
    """A topic with a message in it, which also lets the brokers' first second pass: until
    its stats service has sampled once, 4.9.8 answers GET_BROKER_RUNTIME_INFO with
    SYSTEM_ERROR (NoSuchElementException from StoreStatsService's empty sample list)."""
    made = invoke("updateTopic", "-c", CLUSTER, "-t", "Check", "-n", ns, "--yes")
    assert made.exit_code == 0, made.stderr
    sent = invoke("sendMessage", "-t", "Check", "-p", "first", "-n", ns, "--yes")
    assert sent.exit_code == 0, sent.stderr


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheCluster]:
    """A name server, an ASYNC_MASTER and its SLAVE, registered; stopped after the module."""
    java, opts, cp = _java()
    root = tmp_path_factory.mktemp("apache")
    ns_port = free_port(neighbours=())
    ports = {"m": free_port(), "s": free_port()}
    (root / "ns.conf").write_text(f"listenPort={ns_port}\n")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        base = [java, "-Xmx256m", *opts, f"-Duser.home={root}", f"-Drmq.logdir={root}/logs",
                "-cp", cp]
        ns = _start([*base, "org.apache.rocketmq.namesrv.NamesrvStartup",
                     "-c", str(root / "ns.conf")], root / "ns.out")
        procs.append(ns)
        _until_booted(root / "ns.out", ns)
        for name, (bid, role) in {"m": (0, "ASYNC_MASTER"), "s": (1, "SLAVE")}.items():
            store = root / name / "store"
            (root / name).mkdir()
            (root / name / "broker.conf").write_text("\n".join([
                f"brokerClusterName={CLUSTER}", f"brokerName={BROKER}", f"brokerId={bid}",
                f"brokerRole={role}", "flushDiskType=ASYNC_FLUSH",
                f"namesrvAddr=127.0.0.1:{ns_port}", "brokerIP1=127.0.0.1",
                f"listenPort={ports[name]}", f"storePathRootDir={store}",
                f"storePathCommitLog={store}/commitlog", "mappedFileSizeCommitLog=16777216",
                "mappedFileSizeConsumeQueue=60000", ""]))
            procs.append(_start([java, "-Xmx384m", "-XX:MaxDirectMemorySize=256m",
                                 *base[2:], "org.apache.rocketmq.broker.BrokerStartup",
                                 "-c", str(root / name / "broker.conf")], root / f"{name}.out"))
        for name, proc in zip("ms", procs[1:], strict=True):
            _until_booted(root / f"{name}.out", proc)
        _first_message(f"127.0.0.1:{ns_port}")
        yield ApacheCluster(f"127.0.0.1:{ns_port}", f"127.0.0.1:{ports['m']}",
                            f"127.0.0.1:{ports['s']}")
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
