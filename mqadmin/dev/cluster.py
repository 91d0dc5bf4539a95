"""``mqadmin dev up/down/status``: a name server, broker-a master and slave, demo traffic.

How this works: everything lives under one data directory (``./.mqdev`` by default):
generated configs (``namesrv.properties``, ``broker-a-master.conf``, ``broker-a-slave.conf``),
the stores, the logs, and ``state.json`` with the pid and port of every process.  `up`
starts each server as a detached process (its own session, so it outlives the command),
waits until the name server lists the master and the slave, creates the demo topics and
groups, and starts the demo traffic (dev/traffic.py).  A second `up` finds every process of
the state file alive and says so; a state file whose processes are gone is stale and is
cleaned before starting again.  `down` sends SIGTERM to each process (traffic first, the
name server last), waits, and sends SIGKILL to what is still running.  A pid is only
signalled while its command line still names the data directory, so a reused pid is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.remoting import loop
from mqadmin.exit_codes import CliError

DEFAULT_DATA_DIR = ".mqdev"
STATE_FILE = "state.json"
PORTS_FILE = "ports.json"  # the ports of the last run, reused so message ids stay valid
CLUSTER = "DevCluster"
BROKER = "broker-a"
DELAY_LEVELS = "1s 2s 3s 4s 5s"
#: Topic -> queues.
DEMO_TOPICS = {"DemoOrders": 4, "DemoPayments": 2}
#: Group -> retries before its dead-letter queue.
DEMO_GROUPS = {"demo-consumer": 2, "demo-laggard": 2}
#: Start order; `down` stops in the reverse order.
PROCESSES = ("namesrv", "broker-a-master", "broker-a-slave", "traffic")
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL = 0.05

#: Children started by this process, so they can be waited for (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class DevError(CliError):
    """The dev cluster could not start or stop; the message says where to look."""


@dataclass(slots=True)
class DevState:
    data_dir: str
    namesrv: str  # host:port
    brokers: dict[str, str] = field(default_factory=dict)  # process name -> host:port
    pids: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def read_state(data_dir: Path) -> DevState | None:
    try:
        doc = json.loads(state_path(data_dir).read_text())
        return DevState(**doc)
    except (OSError, ValueError, TypeError):
        return None


def _write_state(state: DevState) -> None:
    path = state_path(Path(state.data_dir))
    path.write_text(json.dumps(asdict(state), indent=2) + "\n")


# ---------------------------------------------------------------------------- processes


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_ours(pid: int, data_dir: Path) -> bool:
    """Whether `pid` runs (not a zombie) and its command line names `data_dir`."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no /proc (macOS): trust the pid
    try:
        if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        return str(data_dir) in (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _spawn(name: str, args: list[str], data_dir: Path) -> int:
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{name}.out", "ab") as out:
        child = subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, cwd=data_dir)
    _CHILDREN[child.pid] = child
    return child.pid


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, neighbours: tuple[int, ...] = ()) -> int:
    """A port the OS has free now, with `neighbours` (offsets such as -2, +1) free too."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if all(1024 < port + d < 65536 and _port_free(port + d) for d in neighbours):
            return port
    raise DevError("found no free port; pass the ports with --namesrv-port/--broker-port")


BROKER_NEIGHBOURS = (-2, 1)  # the fast port (listenPort - 2) and the HA port (+1)


def _ports(data_dir: Path, asked: dict[str, int]) -> dict[str, int]:
    """The port of each server: the one asked for, else last run's if still free (offset
    message ids hold the broker's address), else a free one; saved for the next run."""
    try:
        last = {k: int(v) for k, v in json.loads((data_dir / PORTS_FILE).read_text()).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        last = {}
    ports: dict[str, int] = {}
    for name, port in asked.items():
        neighbours = () if name == "namesrv" else BROKER_NEIGHBOURS
        if port:
            ports[name] = port
        elif (old := last.get(name)) and old not in ports.values() and all(
                _port_free(old + d) for d in (0, *neighbours)):
            ports[name] = old
        else:
            port = free_port(neighbours=neighbours)
            while port in ports.values():
                port = free_port(neighbours=neighbours)
            ports[name] = port
    (data_dir / PORTS_FILE).write_text(json.dumps(ports) + "\n")
    return ports


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait(what: str, ready: Callable[[], bool], pids: dict[str, int], data_dir: Path,
          timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        for name, pid in pids.items():
            if not is_ours(pid, data_dir):
                raise DevError(f"{name} exited while starting; its output "
                               f"({data_dir / 'logs' / (name + '.out')}):\n"
                               f"{_tail(data_dir / 'logs' / (name + '.out'))}")
        if time.monotonic() > deadline:
            raise DevError(f"{what} not ready after {timeout:g} s; see the logs in "
                           f"{data_dir / 'logs'}")
        time.sleep(POLL)


# ---------------------------------------------------------------------------- configs


def _namesrv_conf(data_dir: Path, port: int) -> Path:
    path = data_dir / "namesrv.properties"
    ns = data_dir / "namesrv"
    path.write_text("\n".join([
        f"listenPort={port}", "bindAddress=127.0.0.1", f"rocketmqHome={data_dir}",
        f"kvConfigPath={ns / 'kvConfig.json'}", f"configStorePath={ns / 'namesrv.properties'}",
        f"logsDir={data_dir / 'logs' / 'namesrv'}", ""]))
    return path


def _broker_conf(data_dir: Path, name: str, port: int, namesrv: str, slave: bool) -> Path:
    path = data_dir / f"{name}.conf"
    path.write_text("\n".join([
        f"brokerClusterName={CLUSTER}", f"brokerName={BROKER}",
        f"brokerId={1 if slave else 0}", f"brokerRole={'SLAVE' if slave else 'ASYNC_MASTER'}",
        "flushDiskType=ASYNC_FLUSH", f"namesrvAddr={namesrv}", "brokerIP1=127.0.0.1",
        "bindAddress=127.0.0.1", f"listenPort={port}",
        f"storePathRootDir={data_dir / name / 'store'}",
        f"logsDir={data_dir / 'logs' / name}", f"messageDelayLevel={DELAY_LEVELS}",
        "mappedFileSizeCommitLog=16777216", "fileReservedTime=48", ""]))
    return path


# ---------------------------------------------------------------------------- up / down


def _registered(namesrv: str) -> bool:
    async def check() -> bool:
        async with MQAdmin(namesrv, timeout=1.0) as admin:
            info = await admin.namesrv.cluster_info()
        data = info.broker_addr_table.get(BROKER)
        return data is not None and {0, 1} <= set(data.broker_addrs)

    try:
        return loop.run(check())
    except ClientError:
        return False


def _accepting(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def create_demo(namesrv: str) -> None:
    """The demo topics (on the cluster's masters) and groups (few retries, so failed
    messages reach their dead-letter queue within a minute)."""
    async with MQAdmin(namesrv) as admin:
        for topic, queues in DEMO_TOPICS.items():
            for outcome in await admin.create_topic_on_cluster(
                    CLUSTER, TopicConfig(topic, queues, queues)):
                if outcome.error is not None:
                    raise outcome.error
        for group, retries in DEMO_GROUPS.items():
            for outcome in await admin.create_group_on_cluster(
                    CLUSTER, SubscriptionGroupConfig(group, retry_max_times=retries)):
                if outcome.error is not None:
                    raise outcome.error


def up(data_dir: Path, *, namesrv_port: int = 0, broker_port: int = 0,
       slave_port: int = 0, traffic: bool = True, rate: float = 5.0,
       timeout: float = READY_TIMEOUT,
       on_step: Callable[[str], None] | None = None) -> tuple[DevState, bool]:
    """Start the dev cluster under `data_dir` (ports 0: free ones); returns its state and
    whether it was already running.

    Raises:
        DevError: a process did not start; the message names its log.
    """
    step = on_step or (lambda _: None)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    old = read_state(data_dir)
    if old is not None:
        alive = [n for n, pid in old.pids.items() if is_ours(pid, data_dir)]
        if alive and len(alive) == len(old.pids):
            return old, True
        step("cleaning a stale state file" + (f" (stopping {', '.join(alive)})" if alive
                                              else ""))
        down(data_dir, timeout=STOP_TIMEOUT)
    ports = _ports(data_dir, {"namesrv": namesrv_port, "broker-a-master": broker_port,
                              "broker-a-slave": slave_port})
    ns_port = ports["namesrv"]
    namesrv = f"127.0.0.1:{ns_port}"
    state = DevState(str(data_dir), namesrv, started_at=time.time())
    try:
        step(f"starting the name server on {namesrv}")
        state.pids["namesrv"] = _spawn(
            "namesrv", ["-m", "engine.namesrv.main", "-c",
                        str(_namesrv_conf(data_dir, ns_port))], data_dir)
        _write_state(state)
        _wait("the name server", lambda: _accepting(ns_port), state.pids, data_dir, timeout)
        for name, slave in (("broker-a-master", False), ("broker-a-slave", True)):
            port = ports[name]
            step(f"starting {name} on 127.0.0.1:{port}")
            conf = _broker_conf(data_dir, name, port, namesrv, slave)
            state.pids[name] = _spawn(name, ["-m", "engine.broker.main", "-c", str(conf)],
                                      data_dir)
            state.brokers[name] = f"127.0.0.1:{port}"
            _write_state(state)
        _wait("the brokers' registration", lambda: _registered(namesrv), state.pids, data_dir,
              timeout)
        step("creating the demo topics and groups")
        loop.run(create_demo(namesrv))
        if traffic:
            step("starting the demo traffic")
            state.pids["traffic"] = _spawn(
                "traffic", ["-m", "mqadmin.dev.traffic", "-n", namesrv, "--data-dir",
                            str(data_dir), "--rate", str(rate)], data_dir)
            _write_state(state)
    except BaseException:
        down(data_dir, timeout=STOP_TIMEOUT)
        raise
    return state, False


@dataclass(frozen=True, slots=True)
class Stopped:
    process: str
    pid: int
    result: str  # stopped, killed, not running


def down(data_dir: Path, *, timeout: float = STOP_TIMEOUT) -> list[Stopped]:
    """Stop every process of the state file (SIGTERM, then SIGKILL after `timeout`) and
    remove the state file."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        return []
    order = sorted(state.pids, key=lambda n: -PROCESSES.index(n) if n in PROCESSES else 0)
    running = {n: state.pids[n] for n in order if is_ours(state.pids[n], data_dir)}
    results = {n: Stopped(n, pid, "not running") for n, pid in state.pids.items()}
    for name, pid in running.items():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while is_ours(pid, data_dir) and time.monotonic() < deadline:
            time.sleep(POLL)
        if is_ours(pid, data_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while is_ours(pid, data_dir):
                time.sleep(POLL)
            results[name] = Stopped(name, pid, "killed")
        else:
            results[name] = Stopped(name, pid, "stopped")
        child = _CHILDREN.pop(pid, None)
        if child is not None:
            child.wait()
    state_path(data_dir).unlink(missing_ok=True)
    return [results[n] for n in order]


def status(data_dir: Path) -> list[dict[str, object]]:
    """One row per process of the state file: its pid, address and whether it runs."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        return []
    addrs = {"namesrv": state.namesrv, **state.brokers}
    return [{"process": name, "pid": pid, "addr": addrs.get(name),
             "running": is_ours(pid, data_dir)} for name, pid in state.pids.items()]


def wait_stopped(pids: list[int], data_dir: Path, timeout: float = STOP_TIMEOUT) -> bool:
    """Whether every pid is gone within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(is_ours(p, data_dir) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True
