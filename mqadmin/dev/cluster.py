"""``mqadmin dev up/down/status/restart``: a name server, two broker-a brokers, demo traffic
(with ``--controller``: a controller in the name server and three brokers in controller mode).

How this works: everything lives under one data directory (``./.mqdev`` by default):
generated configs (``namesrv.properties``, ``broker-a-n1.conf``, ``broker-a-n2.conf``), the
stores, the logs, and ``state.json`` with the pid and port of every process.  The brokers
are named by node, not role: broker-a-n1 starts as the master (brokerId 0) and broker-a-n2
as its slave, but a switchover or failover swaps them, and a broker restarts in the role
it last had (its store keeps it), so `status` asks the cluster for each one's current role.
`up` starts what the state file does not show running, each as a detached process (its own
session, so it outlives the command) on the port it had, and waits until it serves (the name
server accepts connections, a broker is registered); on a first start it also creates the
demo topics and groups and starts the demo traffic (dev/traffic.py) and a lag collector
(``mqadmin lag collect``).  The brokers and the lag collector serve /metrics for
Prometheus, each on a port of its own kept in the state (the brokers with Apache 5.x's
``metricsExporterType=PROM``, the collector with ``--metrics-port``; `metrics_urls` lists
them; docs/monitoring.md).  Each broker also runs the gRPC proxy of RocketMQ 5 clients
(``--enable-proxy``, local mode, docs/proxy.md) on a port of its own, with one worker process
(a demo on one machine, beside the other processes: not one worker per core); `grpc_endpoints`
gives the endpoints a 5.x client is configured with.  So a second `up` restarts only what died,
and `restart NAME` stops and starts one process.  `down` stops every process (the lag
collector and traffic first, the name server last).  A pid is only signalled while its
command line still names the data directory, so a reused pid is safe.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.trace import TRACE_TOPIC
from engine.remoting import loop
from mqadmin.dev import access, processes
from mqadmin.dev.processes import (
    GRPC_SUFFIX,
    METRICS_SUFFIX,
    DevError,
    accepting,
    is_ours,
    log_path,
    wait_ready,
)
from mqadmin.exit_codes import UsageProblem

__all__ = ["DevError", "DevState", "Stopped", "down", "read_state", "restart", "status",
           "up"]

DEFAULT_DATA_DIR = ".mqdev"
STATE_FILE = "state.json"
PORTS_FILE = "ports.json"  # the ports of the last run, reused so message ids stay valid
CLUSTER = "DevCluster"
BROKER = "broker-a"
DELAY_LEVELS = "1s 2s 3s 4s 5s"
#: Topic -> queues.
DEMO_TOPICS = {"DemoOrders": 4, "DemoPayments": 2}
#: Group -> retries before its dead-letter queue.
DEMO_GROUPS = {"demo-consumer": 2, "demo-laggard": 2, "demo-grpc": 2}
#: Broker process -> whether it starts as the slave (brokerId 1) the very first time.
BROKERS = {"broker-a-n1": False, "broker-a-n2": True}
#: The third broker of `up --controller` (a master and two slaves under the controller).
CONTROLLER_BROKER = "broker-a-n3"
ALL_BROKERS = (*BROKERS, CONTROLLER_BROKER)
#: Start order; `down` stops in the reverse order.
PROCESSES = ("namesrv", *ALL_BROKERS, "traffic", "lag")
#: The demo parts (`--no-traffic` leaves them out): traffic and the lag collector watching it.
DEMO_PROCESSES = ("traffic", "lag")
#: The lag collector samples every 5 s under the name of the context `dev up` saves; a
#: healthy push consumer's committed offset trails by the batch it pulled last (the commit
#: rides on its next pull), so a few messages of lag are allowed.
LAG_ARGS = ("--name", "dev", "--interval", "5s", "--allowed-lag", "5")
#: Processes that serve /metrics (on a port of their own: NAME-metrics in the ports file).
METRICS_PROCESSES = (*ALL_BROKERS, "lag")
#: Process names of earlier versions (state files, ports and store folders of a data dir).
LEGACY_NAMES = {"broker-a-master": "broker-a-n1", "broker-a-slave": "broker-a-n2"}
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@dataclass(slots=True)
class DevState:
    data_dir: str
    namesrv: str  # host:port
    brokers: dict[str, str] = field(default_factory=dict)  # process name -> host:port
    pids: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0
    metrics: dict[str, str] = field(default_factory=dict)  # process name -> host:port
    grpc: dict[str, str] = field(default_factory=dict)  # broker -> its gRPC proxy's host:port
    #: `up --controller`: the controller the name server embeds (host:port), else "".
    controller: str = ""


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _renamed(table: dict[str, object]) -> dict[str, object]:
    return {LEGACY_NAMES.get(k, k): v for k, v in table.items()}


def read_state(data_dir: Path) -> DevState | None:
    try:
        doc = json.loads(state_path(data_dir).read_text())
        doc["pids"], doc["brokers"] = _renamed(doc["pids"]), _renamed(doc.get("brokers", {}))
        return DevState(**doc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _write_state(state: DevState) -> None:
    path = state_path(Path(state.data_dir))
    path.write_text(json.dumps(asdict(state), indent=2) + "\n")


# ---------------------------------------------------------------------------- configs


def _controller_lines(data_dir: Path, controller: str) -> list[str]:
    """The name server's embedded controller (5.3.3's keys), when there is one."""
    if not controller:
        return []
    return ["enableControllerInNamesrv=true", "controllerDLegerGroup=DevControllerGroup",
            f"controllerDLegerPeers=n0-{controller}", "controllerDLegerSelfId=n0",
            f"controllerStorePath={data_dir / 'controller'}"]


def _namesrv_conf(data_dir: Path, port: int, controller: str = "") -> Path:
    path = data_dir / "namesrv.properties"
    ns = data_dir / "namesrv"
    path.write_text("\n".join([
        *_controller_lines(data_dir, controller),
        f"listenPort={port}", "bindAddress=127.0.0.1", f"rocketmqHome={data_dir}",
        f"kvConfigPath={ns / 'kvConfig.json'}", f"configStorePath={ns / 'namesrv.properties'}",
        f"logsDir={data_dir / 'logs' / 'namesrv'}",
        *access.config_lines(access.existing(data_dir), broker=False), ""]))
    return path


def _role_lines(name: str, controller: str) -> list[str]:
    """A broker's role: fixed at its first start, or (with a controller) given by the
    controller, acknowledging a send once every member of the SyncStateSet has it."""
    if controller:
        return ["brokerRole=SYNC_MASTER", "enableControllerMode=true",
                f"controllerAddr={controller}", "allAckInSyncStateSet=true"]
    slave = BROKERS[name]
    return [f"brokerId={1 if slave else 0}", f"brokerRole={'SLAVE' if slave else 'ASYNC_MASTER'}"]


def _broker_conf(data_dir: Path, name: str, port: int, namesrv: str,
                 metrics_port: int, controller: str = "") -> Path:
    """The broker's config; its role and id are those of its first start (a role change
    is kept in its store and wins over these), or the controller's; /metrics on
    `metrics_port` (Apache 5.x's keys)."""
    for old, new in LEGACY_NAMES.items():  # a data dir of an earlier version
        if new == name and (data_dir / old).is_dir() and not (data_dir / name).exists():
            (data_dir / old).rename(data_dir / name)
    path = data_dir / f"{name}.conf"
    path.write_text("\n".join([
        f"brokerClusterName={CLUSTER}", f"brokerName={BROKER}", *_role_lines(name, controller),
        "flushDiskType=ASYNC_FLUSH", f"namesrvAddr={namesrv}", "brokerIP1=127.0.0.1",
        "bindAddress=127.0.0.1", f"listenPort={port}",
        f"storePathRootDir={data_dir / name / 'store'}",
        f"logsDir={data_dir / 'logs' / name}", f"messageDelayLevel={DELAY_LEVELS}",
        "mappedFileSizeCommitLog=16777216", "fileReservedTime=48",
        "traceTopicEnable=true",  # the demo clients trace: the dashboard shows timelines
        "metricsExporterType=PROM", "metricsPromExporterHost=127.0.0.1",
        f"metricsPromExporterPort={metrics_port}",
        *access.config_lines(access.existing(data_dir), broker=True), ""]))
    return path


# ---------------------------------------------------------------------------- starting


def _registered(namesrv: str, addr: str | None = None, data_dir: Path | None = None) -> bool:
    """Whether the name server lists `addr` under broker-a with the brokerId the broker
    itself has now (a returning old master is listed only once it demoted itself); None: a
    master and a slave."""
    async def check() -> bool:
        keys = access.existing(data_dir) if data_dir is not None else None
        async with MQAdmin(namesrv, timeout=1.0,
                           credentials=keys.admin if keys else None) as admin:
            info = await admin.namesrv.cluster_info()
            data = info.broker_addr_table.get(BROKER)
            if data is None:
                return False
            if addr is None:
                return {0, 1} <= set(data.broker_addrs)
            listed = [i for i, a in data.broker_addrs.items() if a == addr]
            if not listed:
                return False
            own = (await admin.broker.broker_config(addr)).get("brokerId")
            return own == str(listed[0])

    try:
        return loop.run(check())
    except (ClientError, TimeoutError):
        return False


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def metrics_urls(state: DevState) -> dict[str, str]:
    """Process name -> its /metrics URL (brokers and the lag collector)."""
    return {n: f"http://{a}/metrics" for n, a in state.metrics.items() if n in state.pids}


def grpc_endpoints(state: DevState) -> str:
    """The gRPC proxies of the running brokers, as a 5.x client's endpoints ("a;b")."""
    return ";".join(a for n, a in state.grpc.items() if n in state.pids)


def _proxy_conf(data_dir: Path, name: str, grpc_port: int) -> Path:
    """The rmq-proxy.json of broker `name`'s proxy (Apache 5.3's keys, and ours: one worker)."""
    path = data_dir / f"{name}-proxy.json"
    path.write_text(json.dumps({"grpcServerPort": grpc_port, "proxyWorkers": 1}, indent=2)
                    + "\n")
    return path


def _metrics_port(state: DevState, name: str) -> int:
    """The /metrics port `name` had, else a free one."""
    held = state.metrics.get(name)
    return _port(held) if held else processes.free_port()


def _start(name: str, state: DevState, port: int, data_dir: Path, rate: float,
           metrics_port: int = 0, grpc_port: int = 0) -> None:
    """Spawn process `name` (its config written for `port`, /metrics on `metrics_port`
    for the brokers and the lag collector, a broker's gRPC proxy on `grpc_port`) and record
    it in the state."""
    if name in METRICS_PROCESSES:
        metrics_port = metrics_port or _metrics_port(state, name)
        state.metrics[name] = f"127.0.0.1:{metrics_port}"
    if name == "namesrv":
        state.namesrv = f"127.0.0.1:{port}"
        args = ["-m", "engine.namesrv.main", "-c",
                str(_namesrv_conf(data_dir, port, state.controller))]
    elif name in ALL_BROKERS:
        state.brokers[name] = f"127.0.0.1:{port}"
        held = state.grpc.get(name)
        grpc_port = grpc_port or (_port(held) if held else processes.free_port())
        state.grpc[name] = f"127.0.0.1:{grpc_port}"
        args = ["-m", "engine.broker.main", "-c",
                str(_broker_conf(data_dir, name, port, state.namesrv, metrics_port,
                                 state.controller)),
                "--enable-proxy", "-pc", str(_proxy_conf(data_dir, name, grpc_port))]
    elif name == "traffic":
        args = ["-m", "mqadmin.dev.traffic", "-n", state.namesrv, "--data-dir", str(data_dir),
                "--rate", str(rate)]
        if state.grpc:  # group demo-grpc: the 5.x Python client through the proxies
            args += ["--grpc", ";".join(state.grpc.values())]
        if access.existing(data_dir) is not None:  # the demo app's key, not the operator's
            args += ["--credentials", str(data_dir / access.APP_FILE)]
    elif name == "lag":
        args = ["-m", "mqadmin.app", "lag", "collect", "-n", state.namesrv, *LAG_ARGS,
                "--data-dir", str(data_dir), "--metrics-host", "127.0.0.1",
                "--metrics-port", str(metrics_port)]
    else:
        raise DevError(f"no way to start {name!r}; `mqadmin dev down` and `up` again")
    keys = access.existing(data_dir)
    env = {} if keys is None or name != "lag" else {  # reads every group's offsets: SUPER
        "MQADMIN_ACCESS_KEY": keys.admin.access_key, "MQADMIN_SECRET_KEY": keys.admin.secret_key}
    state.pids[name] = processes.spawn(name, args, data_dir, env=env)
    _write_state(state)


def _wait_serving(name: str, state: DevState, data_dir: Path, timeout: float) -> None:
    if name == "namesrv":
        port = _port(state.namesrv)
        wait_ready("the name server", lambda: accepting(port), {name: state.pids[name]},
                   data_dir, timeout)
        if state.controller:
            ctl = _port(state.controller)
            wait_ready("the controller", lambda: accepting(ctl), {name: state.pids[name]},
                       data_dir, timeout)
    elif name in ALL_BROKERS:
        addr = state.brokers[name]
        wait_ready(f"{name}'s registration",
                   lambda: accepting(_port(addr)) and _registered(state.namesrv, addr, data_dir),
                   {name: state.pids[name]}, data_dir, timeout)


async def create_demo(namesrv: str, keys: access.DevKeys | None = None) -> None:
    """The demo topics (on the cluster's masters) and groups (few retries, so failed
    messages reach their dead-letter queue within a minute); with access control, the demo
    application's user and rules on every broker."""
    async with MQAdmin(namesrv, credentials=keys.admin if keys else None) as admin:
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
        if keys is not None:
            info = await admin.namesrv.cluster_info()
            brokers = [a for d in info.broker_addr_table.values() for a in d.broker_addrs.values()]
            await access.grant_app(admin, brokers, keys, [*DEMO_TOPICS, TRACE_TOPIC],
                                   list(DEMO_GROUPS))


def up(data_dir: Path, *, namesrv_port: int = 0, broker_port: int = 0,
       slave_port: int = 0, traffic: bool = True, rate: float = 5.0,
       timeout: float = READY_TIMEOUT, open_: bool = False, controller: bool = False,
       on_step: Callable[[str], None] | None = None) -> tuple[DevState, bool]:
    """Start what of the dev cluster under `data_dir` does not run (ports 0: last run's,
    else free ones); returns its state and whether everything was already running.  Access
    control is on (dev/access.py) unless `open_`.  With `controller`, the name server embeds
    a controller and three brokers run in controller mode (docs/ha.md).

    Raises:
        DevError: a process did not start; the message names its log.
        UsageProblem: the data dir runs the other kind of cluster.
    """
    step = on_step or (lambda _: None)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    keys = None
    if open_:
        access.forget(data_dir)
    else:
        keys = access.load_or_create(data_dir)
    old = read_state(data_dir)
    alive = {n: pid for n, pid in (old.pids if old else {}).items() if is_ours(pid, data_dir)}
    if old is not None and alive and bool(old.controller) != controller:
        raise UsageProblem(f"{data_dir} runs a cluster {'with' if old.controller else 'without'}"
                           f" a controller; `mqadmin dev down --data-dir {data_dir}` first")
    wanted = [n for n in PROCESSES if (n not in DEMO_PROCESSES or traffic)
              and (n != CONTROLLER_BROKER or controller)]
    dead = [n for n in wanted if n not in alive]
    if not dead and old is not None:
        return old, True
    fresh = not alive
    running = {"namesrv": old.namesrv, **old.brokers} if old and alive else {}
    asked = {"namesrv": namesrv_port, "broker-a-n1": broker_port, "broker-a-n2": slave_port}
    if controller:
        asked |= {CONTROLLER_BROKER: 0, "controller": 0}
    brokers = [n for n in ALL_BROKERS if n in wanted]
    asked = {n: _port(running[n]) if n in alive and n in running else p
             for n, p in asked.items()}
    held = old.metrics if old else {}
    asked |= {n + METRICS_SUFFIX: _port(held[n]) if n in alive and n in held else 0
              for n in METRICS_PROCESSES if n in wanted}
    grpc_held = old.grpc if old else {}
    asked |= {n + GRPC_SUFFIX: _port(grpc_held[n]) if n in alive and n in grpc_held else 0
              for n in brokers}
    if controller and old is not None and old.controller and alive:
        asked["controller"] = _port(old.controller)
    ports = processes.choose_ports(data_dir / PORTS_FILE, asked, LEGACY_NAMES)
    if "namesrv" in dead and old is not None and ports["namesrv"] != _port(old.namesrv):
        step(f"the name server's port {_port(old.namesrv)} is taken: restarting everything")
        down(data_dir, timeout=STOP_TIMEOUT)
        alive, dead, fresh = {}, wanted, True
    state = DevState(str(data_dir), f"127.0.0.1:{ports['namesrv']}",
                     pids=dict(alive), started_at=old.started_at if old and alive else 0)
    state.brokers = {n: a for n, a in (old.brokers if old else {}).items() if n in alive}
    state.metrics = {n: a for n, a in held.items() if n in alive}
    state.grpc = {n: a for n, a in grpc_held.items() if n in alive}
    state.started_at = state.started_at or time.time()
    state.controller = f"127.0.0.1:{ports['controller']}" if controller else ""
    try:
        for name in dead:
            if name == "traffic" and fresh:
                step("creating the demo topics and groups")
                loop.run(create_demo(state.namesrv, keys))
            verb = "starting" if fresh else "restarting"
            where = f" on 127.0.0.1:{ports[name]}" if name in ports else ""
            step(f"{verb} {name}{where}")
            _start(name, state, ports.get(name, 0), data_dir, rate,
                   ports.get(name + METRICS_SUFFIX, 0), ports.get(name + GRPC_SUFFIX, 0))
            _wait_serving(name, state, data_dir, timeout)
        if fresh and "traffic" not in dead:
            step("creating the demo topics and groups")
            loop.run(create_demo(state.namesrv, keys))
    except BaseException:
        if fresh:
            down(data_dir, timeout=STOP_TIMEOUT)
        raise
    return state, False


def restart(data_dir: Path, name: str, *, rate: float = 5.0, timeout: float = READY_TIMEOUT,
            stop_timeout: float = STOP_TIMEOUT,
            on_step: Callable[[str], None] | None = None) -> Stopped:
    """Stop process `name` of the dev cluster (SIGTERM, SIGKILL after `stop_timeout`) and
    start it again on the same port; waits until it serves.

    Raises:
        UsageProblem: no such process in the state file.
        DevError: nothing runs here, or the process did not start again.
    """
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        raise DevError(f"nothing runs from {data_dir}; start it with `mqadmin dev up "
                       f"--data-dir {data_dir}`")
    if name not in state.pids:
        raise UsageProblem(f"no process {name!r} in {data_dir}; the processes are "
                           f"{', '.join(state.pids)}")
    step = on_step or (lambda _: None)
    pid = state.pids[name]
    step(f"stopping {name} (pid {pid})")
    stopped = Stopped(name, pid, processes.stop(pid, data_dir, stop_timeout))
    port = _port(state.namesrv if name == "namesrv" else state.brokers.get(name, ":0"))
    step(f"starting {name}" + (f" on 127.0.0.1:{port}" if port else ""))
    _start(name, state, port, data_dir, rate)
    _wait_serving(name, state, data_dir, timeout)
    return stopped


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
    results = [Stopped(n, state.pids[n], processes.stop(state.pids[n], data_dir, timeout))
               for n in order]
    state_path(data_dir).unlink(missing_ok=True)
    return results


# ---------------------------------------------------------------------------- status


async def _roles(state: DevState, running: set[str]) -> dict[str, tuple[str | None, int | None]]:
    """Broker process -> (brokerRole the broker reports, brokerId the name server lists)."""
    found: dict[str, tuple[str | None, int | None]] = {}
    keys = access.existing(Path(state.data_dir))
    async with MQAdmin(state.namesrv, timeout=2.0,
                       credentials=keys.admin if keys else None) as admin:
        ids: dict[str, int] = {}
        if "namesrv" in running:
            with contextlib.suppress(ClientError, TimeoutError):
                info = await admin.namesrv.cluster_info()
                data = info.broker_addr_table.get(BROKER)
                ids = {a: i for i, a in data.broker_addrs.items()} if data else {}
        for name, addr in state.brokers.items():
            role = None
            if name in running:
                with contextlib.suppress(ClientError, TimeoutError):
                    role = (await admin.broker.broker_config(addr)).get("brokerRole")
            found[name] = (role, ids.get(addr))
    return found


def status(data_dir: Path) -> list[dict[str, object]]:
    """One row per process of the state file: its pid, address, whether it runs and, for
    a broker, its current role (asked of the broker) and brokerId (the name server's)."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        return []
    addrs = {"namesrv": state.namesrv, **state.brokers}
    running = {n for n, pid in state.pids.items() if is_ours(pid, data_dir)}
    roles = loop.run(_roles(state, running)) if running else {}
    return [{"process": name, "pid": pid, "addr": addrs.get(name),
             "role": roles.get(name, (None, None))[0],
             "brokerId": roles.get(name, (None, None))[1],
             "running": name in running} for name, pid in _in_order(state.pids)]


def _in_order(pids: dict[str, int]) -> list[tuple[str, int]]:
    """The processes in start order (a restarted one was recorded last)."""
    rank = {name: i for i, name in enumerate(PROCESSES)}
    return sorted(pids.items(), key=lambda item: rank.get(item[0], len(rank)))


def check_running(data_dir: Path, rows: list[dict[str, object]]) -> None:
    """Raise when a process of `rows` (from `status`) is down, or when nothing runs.

    Raises:
        DevError: naming each dead process and its log.
    """
    data_dir = data_dir.resolve()
    if not rows:
        raise DevError(f"nothing runs from {data_dir}; start it with `mqadmin dev up "
                       f"--data-dir {data_dir}`")
    dead = [str(r["process"]) for r in rows if not r["running"]]
    if dead:
        logs = ", ".join(str(log_path(data_dir, n)) for n in dead)
        raise DevError(f"{', '.join(dead)} not running (see {logs}); `mqadmin dev up "
                       f"--data-dir {data_dir}` restarts only what is down")
