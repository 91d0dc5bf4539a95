"""Controller-mode failover, kill -9 of the master in cycles: time to the first acknowledged
send on the new master, and that no acknowledged message is lost.

Runs a name server with an embedded controller and three brokers of one set in controller
mode (SYNC_MASTER, allAckInSyncStateSet) as processes, and a producer in this process that
follows the route (a send is acknowledged only once every SyncStateSet member has it).  Each
cycle: wait until the set has three members in sync, SIGKILL the master, time until the
first send acknowledged by another broker, restart the killed broker and wait until it is
back as a slave in the SyncStateSet.  At the end every queue is read from the last master:
each acknowledged body must be there (duplicates beyond at-least-once are counted too).

    python -m benchmarks.bench_failover [--cycles 20] [--freeze SECONDS] [--java] [--cpp]
                                        [--grpc] [--apache5 CYCLES]

With --freeze the master is not killed but frozen (SIGSTOP) for SECONDS, then thawed
(SIGCONT): it must never acknowledge a send after it was replaced, and must come back as a
slave in the SyncStateSet.

With --java Apache 4.9.8's Java producer (benchmarks/java_producer.py; needs
APACHE_RMQ_HOME) sends beside ours, with its own retries and route polling: its takeover
times and its SEND_OK bodies are checked the same way.  With --cpp the Apache C++ client
(PyPI `rocketmq` 0.4.4) sends too, and with --grpc the official RocketMQ 5 Python client
through our gRPC proxy (a process in cluster mode, reading the route from the name server);
both as processes (benchmarks/client_producers.py), checked the same way.  Neither says which
broker stored a send, so their takeover time is to the first acknowledged send that began
after the kill.

With --apache5 CYCLES the same kill cycle then runs against Apache 5.3.3 (needs
APACHE_RMQ5_HOME): its name server, its controller (ControllerStartup, one peer) and three of
its brokers in controller mode with the same settings, under the same producer; both runs'
figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.client_producers import ClientProducer
from benchmarks.java_producer import JavaProducer, Outcome
from benchmarks.java_producer import available as java_available
from benchmarks.machine import machine, percentile
from benchmarks.processes import free_port
from engine.protocol import fastjson
from engine.protocol.body.controller import BrokerReplicasInfo, encode_broker_names
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    send_header_v2,
)
from engine.protocol.message import decode_records
from engine.protocol.wire import from_json, to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

CLUSTER, NAME, TOPIC, QUEUES = "FailoverCluster", "failover-a", "FailoverTopic", 4
ROOT = Path(__file__).resolve().parent.parent
APACHE5 = os.environ.get("APACHE_RMQ5_HOME", "")
BROKER_SETTINGS = {
    "brokerClusterName": CLUSTER, "brokerName": NAME, "brokerIP1": "127.0.0.1",
    "bindAddress": "127.0.0.1", "brokerRole": "SYNC_MASTER", "enableControllerMode": "true",
    "allAckInSyncStateSet": "true", "brokerHeartbeatInterval": "300",
    "checkSyncStateSetPeriod": "500", "haMaxTimeSlaveNotCatchup": "5000",
    "controllerHeartBeatTimeoutMills": "3000", "haSendHeartbeatInterval": "500",
    "haReconnectInterval": "200", "slaveSyncInterval": "1000", "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024), "slaveTimeout": "3000"}


class Process:
    """One of our servers (`module` run with -c), or with `java_main` one of Apache 5.3.3's
    (that class, in the JVM its build's env.sh names, logs under the process's folder)."""

    def __init__(self, root: Path, name: str, module: str, conf: dict[str, str],
                 java_main: str = "", java_opts: str = "") -> None:
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.module, self.conf = module, conf
        self.java_main, self.java_opts = java_main, java_opts
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self, conf: Path) -> list[str]:
        if not self.java_main:
            return [sys.executable, "-m", self.module, "-c", str(conf)]
        return ["bash", "-c", f'. "{APACHE5}/env.sh"; exec $JAVA {self.java_opts} '
                f'$RMQ_COMMON_OPTS -Duser.home={self.dir} -cp "$RMQ_CP" {self.java_main} '
                f'-c {conf}']

    def start(self) -> None:
        path = self.dir / "conf.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
        with open(self.dir / "output.txt", "ab") as out:
            self.proc = subprocess.Popen(self.argv(path), stdout=out, stderr=subprocess.STDOUT,
                                         cwd=ROOT, env={**os.environ, "HOME": str(self.dir)})

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    async def ready(self, marker: str) -> None:
        deadline = time.monotonic() + 180
        while marker not in (self.dir / "output.txt").read_text():
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{self.dir.name} did not start: "
                                 f"{(self.dir / 'output.txt').read_text()[-1500:]}")
            await asyncio.sleep(0.05)


def send_cmd(body: bytes, queue_id: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="FailoverPG", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0, properties="WAIT\x01true\x02")
    return request(RequestCode.SEND_MESSAGE_V2, to_ext(send_header_v2(header)), body)


async def route_master(client: RemotingClient, ns: str) -> str | None:
    try:
        resp = await client.invoke(ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                               {"topic": TOPIC}), 3)
    except RemotingError:
        return None
    if resp.code != ResponseCode.SUCCESS:
        return None
    datas = fastjson.loads(resp.body or b"{}").get("brokerDatas") or []
    addrs = datas[0]["brokerAddrs"] if datas else {}
    return addrs.get(0) or addrs.get("0")


def took_over(o: Outcome, t0: float, master: str) -> bool:
    """Acknowledged after `t0` by another broker than `master`; for a client that does not
    name the broker, a send begun after `t0`."""
    return o.at > t0 and o.broker != master and (o.broker != "?" or o.started > t0)


class Producer:
    """Sends numbered bodies to the route's master; records each acknowledgement."""

    def __init__(self, client: RemotingClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.acked: list[tuple[float, str, bytes]] = []  # (monotonic time, broker, body)

    async def run(self, stop: asyncio.Event) -> None:
        i, addr = 0, None
        while not stop.is_set():
            if addr is None:
                addr = await route_master(self.client, self.ns)
                if addr is None:
                    await asyncio.sleep(0.02)
                    continue
            body = b"m-%08d" % i
            i += 1
            try:
                resp = await self.client.invoke(addr, send_cmd(body, i % QUEUES), 5)
            except RemotingError:
                addr = None
                continue
            if resp.code == ResponseCode.SUCCESS:
                self.acked.append((time.monotonic(), addr, body))
                await asyncio.sleep(0.002)
            else:
                addr = None
                await asyncio.sleep(0.02)


async def sync_state(client: RemotingClient, controller: str) -> tuple[str | None, set[str]]:
    """(the master's address, the addresses of the live in-sync replicas)."""
    resp = await client.invoke(controller, request(
        RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names([NAME])), 3)
    info = from_json(BrokerReplicasInfo, fastjson.loads(resp.body or b"{}"))
    replicas = info.replicas_info_table.get(NAME)
    if replicas is None:
        return None, set()
    return replicas.master_address, {r.broker_address or "" for r in replicas.in_sync_replicas
                                     if r.alive}


async def until_in_sync(client: RemotingClient, controller: str,
                        n: int) -> tuple[str, set[str]]:
    """The master and the live in-sync replicas once there are `n` of them."""
    deadline = time.monotonic() + 120
    while True:
        master, in_sync = await sync_state(client, controller)
        if master and len(in_sync) >= n:
            return master, in_sync
        if time.monotonic() > deadline:
            raise SystemExit(f"the set did not get {n} members in sync (master {master}, "
                             f"in sync {sorted(in_sync)})")
        await asyncio.sleep(0.1)


async def read_all(client: RemotingClient, addr: str) -> collections.Counter[bytes]:
    got: collections.Counter[bytes] = collections.Counter()
    for qid in range(QUEUES):
        offset = 0
        while True:
            header = PullMessageRequestHeader(
                consumer_group="FailoverCG", topic=TOPIC, queue_id=qid, queue_offset=offset,
                max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                sub_version=0, subscription="*", expression_type="TAG")
            resp = await client.invoke(addr, request(RequestCode.PULL_MESSAGE,
                                                     to_ext(header)), 10)
            if resp.code != ResponseCode.SUCCESS:
                break
            got.update(r.body for r in decode_records(resp.body or b""))
            offset = int((resp.ext_fields or {})["nextBeginOffset"])
    return got


async def explain(client: RemotingClient, last: str, brokers: dict[str, Process],
                  producer: Producer, others: list[JavaProducer], lost: set[bytes]) -> None:
    """Which broker acknowledged the lost bodies, and which live broker holds them."""
    by: collections.Counter[str] = collections.Counter(
        a for _, a, b in producer.acked if b in lost)
    for other in others:
        by.update(o.broker for o in other.acked if other.body(o.number) in lost)
    print(f"lost, by the broker that acknowledged them: {dict(by)}; the last master: {last}")
    for addr, process in brokers.items():
        if process.proc is not None and process.proc.poll() is None:
            held = await read_all(client, addr)
            print(f"  {addr} holds {sum(1 for b in lost if b in held)} of them "
                  f"({sum(held.values())} messages)")


def ours(root: Path) -> tuple[str, str, list[Process], dict[str, Process]]:
    """Our name server with an embedded controller and three brokers: (name server,
    controller, the other processes, the brokers by address)."""
    ns_port, ctl_port = free_port(), free_port()
    ns, controller = f"127.0.0.1:{ns_port}", f"127.0.0.1:{ctl_port}"
    namesrv = Process(root, "namesrv", "engine.namesrv.main", {
        "listenPort": str(ns_port), "bindAddress": "127.0.0.1",
        "enableControllerInNamesrv": "true", "controllerDLegerGroup": "bench",
        "controllerDLegerPeers": f"n0-{controller}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(root / "controller"),
        "scanNotActiveBrokerInterval": "500", "logsDir": str(root / "logs")})
    brokers: dict[str, Process] = {}
    for name in ("b1", "b2", "b3"):
        port = free_port()
        brokers[f"127.0.0.1:{port}"] = Process(root, name, "engine.broker.main", {
            **BROKER_SETTINGS, "listenPort": str(port), "namesrvAddr": ns,
            "controllerAddr": controller, "storePathRootDir": str(root / name / "store"),
            "logsDir": str(root / name / "logs")})
    return ns, controller, [namesrv], brokers


def apache5(root: Path) -> tuple[str, str, list[Process], dict[str, Process]]:
    """Apache 5.3.3's name server, its controller (one peer) and three of its brokers in
    controller mode with the settings ours get."""
    ns_port, ctl_port = free_port(), free_port()
    ns, controller = f"127.0.0.1:{ns_port}", f"127.0.0.1:{ctl_port}"
    namesrv = Process(root, "namesrv", "", {"listenPort": str(ns_port)},
                      "org.apache.rocketmq.namesrv.NamesrvStartup", "-Xmx256m $RMQ_LOG_NAMESRV")
    ctl = Process(root, "controller", "", {
        "controllerDLegerGroup": "bench", "controllerDLegerPeers": f"n0-{controller}",
        "controllerDLegerSelfId": "n0", "controllerStorePath": str(root / "controller"),
        "scanNotActiveBrokerInterval": "500"},
        "org.apache.rocketmq.controller.ControllerStartup", "-Xmx256m $RMQ_LOG_CONTROLLER")
    brokers: dict[str, Process] = {}
    for name in ("b1", "b2", "b3"):
        port = free_port()
        store = root / name / "store"
        brokers[f"127.0.0.1:{port}"] = Process(root, name, "", {
            **BROKER_SETTINGS, "listenPort": str(port), "namesrvAddr": ns,
            "controllerAddr": controller, "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog")},
            "org.apache.rocketmq.broker.BrokerStartup",
            "-Xms256m -Xmx384m -XX:MaxDirectMemorySize=512m $RMQ_LOG_BROKER")
    return ns, controller, [namesrv, ctl], brokers


async def start_proxy(root: Path, ns: str) -> tuple[Process, str]:
    """Our gRPC proxy as a process in cluster mode (in one process); (it, its endpoint)."""
    port = free_port()
    proxy = Process(root, "proxy", "engine.proxy.main", {})
    path = proxy.dir / "rmq-proxy.json"
    path.write_text(fastjson.dumps({"grpcServerPort": port,
                                    "topicRouteServiceCacheRefreshSeconds": 1}))
    with open(proxy.dir / "output.txt", "ab") as out:
        proxy.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.proxy.main", "-pc", str(path), "-n", ns,
             "--workers", "0", "--logs-dir", str(proxy.dir / "logs")],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "HOME": str(proxy.dir)})
    await proxy.ready("boot success")
    return proxy, f"127.0.0.1:{port}"


async def bench(cycles: int, freeze: float, java: bool, apache: bool = False,
                keep: str = "", cpp: bool = False, grpc: bool = False) -> None:
    print(f"== {'Apache 5.3.3' if apache else 'this engine'}: {cycles} cycles", flush=True)
    with contextlib.ExitStack() as stack:
        if keep:
            tmp = tempfile.mkdtemp(dir=keep)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
        root = Path(tmp)
        if keep:
            print(f"processes' folders (logs, stores) kept under {root}", flush=True)
        ns, controller, servers, brokers = (apache5 if apache else ours)(root)
        client = RemotingClient()
        others: list[tuple[str, JavaProducer]] = []  # (label, producer process)
        running: list[asyncio.Task[int]] = []
        try:
            for server in servers:
                server.start()
                await server.ready("boot success")
            for broker in brokers.values():
                broker.start()
                await broker.ready("boot success")
            master, _ = await until_in_sync(client, controller, 3)
            resp = await client.invoke(master, request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                "writeQueueNums": str(QUEUES), "perm": "6",
                "topicFilterType": "SINGLE_TAG"}), 10)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            await asyncio.sleep(12 if apache else 2)  # the slaves' metadata sync: the topic
            producer = Producer(client, ns)
            stop = asyncio.Event()
            sending = asyncio.create_task(producer.run(stop))
            if java:
                others.append(("Java 4.9.8", await asyncio.to_thread(
                    JavaProducer, root / "java", ns, TOPIC, "j-", 0)))
            if cpp:
                others.append(("C++ 0.4.4", ClientProducer(root / "cpp", "cpp", ns, TOPIC,
                                                           "c-")))
            if grpc:
                proxy, endpoint = await start_proxy(root, ns)
                servers.append(proxy)
                others.append(("5.x via the proxy", ClientProducer(
                    root / "grpc", "grpc", endpoint, TOPIC, "g-")))
            for label, other in others:
                running.append(asyncio.create_task(other.run()))
                while len(other.acked) < 50:
                    if running[-1].done():
                        raise SystemExit(f"the {label} producer ended before sending")
                    await asyncio.sleep(0.05)
            takeovers: list[float] = []
            other_takeovers: list[list[float]] = [[] for _ in others]
            returned = second_masters = 0
            for cycle in range(cycles):
                master, _ = await until_in_sync(client, controller, 3)
                await asyncio.sleep(0.5)  # sends flowing
                killed = brokers[master]
                t0 = time.monotonic()
                if freeze:
                    killed.signal(signal.SIGSTOP)
                else:
                    killed.kill()
                deadline = t0 + 60
                while not any(t > t0 and a != master for t, a, _ in producer.acked[-50:]):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"cycle {cycle}: no send acknowledged within 60 s")
                    await asyncio.sleep(0.005)
                first = next(t for t, a, _ in producer.acked if t > t0 and a != master)
                takeovers.append(first - t0)
                for (label, other), times in zip(others, other_takeovers, strict=True):
                    while not any(took_over(o, t0, master) for o in other.acked[-50:]):
                        if time.monotonic() > deadline:
                            raise SystemExit(f"cycle {cycle}: the {label} producer had no "
                                             "send acknowledged within 60 s")
                        await asyncio.sleep(0.005)
                    times.append(next(o.at for o in other.acked
                                      if took_over(o, t0, master)) - t0)
                if freeze:
                    await asyncio.sleep(max(0.0, t0 + freeze - time.monotonic()))
                    killed.signal(signal.SIGCONT)
                    await asyncio.sleep(3)  # the thawed master's sends answer or fail
                    late = [t for t, a, _ in producer.acked if a == master and t > first]
                    second_masters += bool(late)
                else:
                    killed.start()
                    await killed.ready("boot success")
                new_master, in_sync = await until_in_sync(client, controller, 3)
                returned += new_master != master and master in in_sync
                print(f"cycle {cycle + 1}: {master} {'frozen' if freeze else 'killed'}, new "
                      f"master {new_master} "
                      f"acknowledged after {takeovers[-1] * 1000:.0f} ms"
                      + "".join(f" ({label} {times[-1] * 1000:.0f} ms)"
                                for (label, _), times in zip(others, other_takeovers,
                                                             strict=True))
                      + "; old master back in the SyncStateSet", flush=True)
            stop.set()
            await sending
            for (_, other), task in zip(others, running, strict=True):
                other.stop()
                await asyncio.wait_for(task, 60)
            last = (await sync_state(client, controller))[0]
            assert last is not None
            stored = await read_all(client, last)
            acked = [b for _, _, b in producer.acked]
            lost = [b for b in acked if b not in stored]
            duplicated = sum(1 for b in acked if stored[b] > 1)
            print(f"\n{'Apache 5.3.3' if apache else 'this engine'}; {machine()}")
            print(f"cycles: {cycles}; old master back as a slave in the SyncStateSet: "
                  f"{returned}/{cycles}"
                  + (f"; frozen {freeze:g} s, acknowledged as a second master after "
                     f"its replacement: {second_masters}" if freeze else ""))
            print(f"{'SIGSTOP' if freeze else 'kill -9'} to first acknowledged send on the "
                  "new master: median "
                  f"{percentile(takeovers, 50) * 1000:.0f} ms, p95 "
                  f"{percentile(takeovers, 95) * 1000:.0f} ms, max "
                  f"{max(takeovers) * 1000:.0f} ms")
            print(f"acknowledged: {len(acked)}; lost: {len(lost)}; stored more than once: "
                  f"{duplicated}")
            for (label, other), times in zip(others, other_takeovers, strict=True):
                other_acked = [other.body(o.number) for o in other.acked]
                other_lost = [b for b in other_acked if b not in stored]
                lost += other_lost
                failed = len(other.outcomes) - len(other_acked)
                where = ("begun after the kill" if isinstance(other, ClientProducer)
                         else "on the new master")
                print(f"{label} producer, kill -9 to first SEND_OK {where}: median "
                      f"{percentile(times, 50) * 1000:.0f} ms, p95 "
                      f"{percentile(times, 95) * 1000:.0f} ms, max "
                      f"{max(times) * 1000:.0f} ms")
                print(f"{label} SEND_OK: {len(other_acked)}; sends failed (exception or not "
                      f"SEND_OK): {failed}; lost: {len(other_lost)}; stored more than once: "
                      f"{sum(1 for b in other_acked if stored[b] > 1)}")
            if second_masters:
                raise SystemExit(f"a thawed master acknowledged sends after its replacement "
                                 f"in {second_masters} cycle(s)")
            if lost:
                await explain(client, last, brokers, producer, [o for _, o in others],
                              set(lost))
                raise SystemExit(f"LOST {len(lost)} acknowledged messages, e.g. {lost[:5]}")
        finally:
            await client.close()
            for _, other in others:
                await other.kill()
            for process in (*brokers.values(), *servers):
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--freeze", type=float, default=0.0, metavar="SECONDS",
                        help="SIGSTOP the master for SECONDS instead of killing it")
    parser.add_argument("--apache5", type=int, default=0, metavar="CYCLES",
                        help="then the same against Apache 5.3.3 (needs APACHE_RMQ5_HOME)")
    parser.add_argument("--keep", default="", metavar="DIR",
                        help="keep the processes' folders (logs, stores) in a folder under DIR")
    parser.add_argument("--java", action="store_true",
                        help="Apache 4.9.8's Java producer sends too (needs APACHE_RMQ_HOME)")
    parser.add_argument("--cpp", action="store_true",
                        help="the Apache C++ client (PyPI rocketmq 0.4.4) sends too")
    parser.add_argument("--grpc", action="store_true",
                        help="the RocketMQ 5 Python client sends too, through our gRPC proxy")
    args = parser.parse_args()
    if args.java and not java_available():
        parser.error("--java needs APACHE_RMQ_HOME (the Apache 4.9.8 build)")
    if args.apache5 and not Path(APACHE5, "env.sh").is_file():
        parser.error("--apache5 needs APACHE_RMQ5_HOME (the Apache 5.3.3 build)")
    if args.cycles:
        asyncio.run(bench(args.cycles, args.freeze, args.java, keep=args.keep, cpp=args.cpp,
                          grpc=args.grpc))
    if args.apache5:
        asyncio.run(bench(args.apache5, args.freeze, args.java, apache=True, keep=args.keep))


if __name__ == "__main__":
    main()
