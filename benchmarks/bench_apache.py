"""Apache's own benchmark Producer and Consumer against Apache 4.9.8's broker and against ours.

Needs the Apache RocketMQ 4.9.8 build (`APACHE_RMQ_HOME`, with its `env.sh`, `classpath` and
`mqadmin.sh`); without it, it says how to get one and exits 2.

Each side is its own name server and broker process on 127.0.0.1 (own ports, stores in a
temporary folder, the same flushDiskType); the benchmark's JVM runs against one side, then the
other, round after round (`--rounds`, the first side alternating), so both see the same load on
a shared machine.  Scenarios (`--scenario`, any of them, in this order):

  * ``p64``: `benchmark.Producer -w 64 -s 1024` (64 threads of synchronous 1 KiB sends);
  * ``p8``: the same with `-w 8`;
  * ``consume``: `benchmark.Consumer` (a fresh group per round, from the first offset) over a
    backlog of `--backlog` 1 KiB messages written once per side by `Producer -q`;
  * ``sync64``: `Producer -w 64 -s 1024` with flushDiskType=SYNC_FLUSH on both brokers.

What is measured is what the benchmark prints every 10 s (each line covers the 9 s before it):
the Producer's Send TPS, Max RT (since its start) and Average RT.  The 4.9.8 Producer prints no
percentile, so there is no p99 here.  A Producer round is one warm-up line (the JVM's start)
and `--lines` measured lines.  A Consumer round is timed from the offsets the group commits
with its pulls (queried every 0.1 s): from the first commit to 99% of the backlog.
The report is each round, the medians per side and the ratio ours/Apache.
Every process started is stopped at the end, on failure and on Ctrl-C; `--budget` bounds the
whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.processes import free_port
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.broker import QueryConsumerOffsetRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

SCENARIOS = ("p64", "p8", "consume", "sync64")
TOPIC = "BenchApache"
BACKLOG_TOPIC = "BenchApacheBacklog"
QUEUES = 8
SEND_LINE = re.compile(r"Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s*([\d.]+)"
                       r" Send Failed: (\d+) Response Failed: (\d+)")


class BenchError(Exception):
    """The comparison cannot go on (a process did not start, a round produced nothing)."""


@dataclass(frozen=True, slots=True)
class Apache:
    """The Apache build: how to run a class of it."""

    home: Path
    java: str
    classpath: str
    opts: list[str]

    @classmethod
    def from_env(cls, home: Path) -> Apache:
        out = subprocess.run(["bash", "-c", f'. "{home}/env.sh" && printf "%s\\n%s\\n%s" '
                              '"$JAVA" "$RMQ_CP" "$RMQ_COMMON_OPTS"'],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return cls(home, out[0], out[1], shlex.split(out[2]))

    def env(self) -> dict[str, str]:
        return {**os.environ, "ROCKETMQ_HOME": str(self.home)}

    def command(self, main: str, *args: str, heap: str = "-Xmx512m",
                home: str | None = None) -> list[str]:
        extra = [f"-Duser.home={home}", f"-Drmq.logdir={home}/logs"] if home else []
        return [self.java, *heap.split(), *self.opts, *extra, "-cp", self.classpath, main,
                *args]


@dataclass(slots=True)
class Procs:
    """Every process this run started, stopped (process group and all) by `stop_all`."""

    running: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, cmd: list[str], log: Path, env: dict[str, str] | None = None
              ) -> subprocess.Popen[str]:
        out = log.open("w")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, env=env)
        out.close()
        self.running.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[str], grace: float = 20) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if proc in self.running:
            self.running.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(list(self.running)):
            self.stop(proc)


@dataclass(frozen=True, slots=True)
class Side:
    """One name server and broker pair under test."""

    name: str          # "apache" or "ours"
    namesrv: str       # host:port
    broker: str        # host:port
    broker_pid: int
    cluster: str


def wait_port(port: int, proc: subprocess.Popen[str], log: Path, timeout: float = 90) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"a server exited with {proc.returncode}; see {log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise BenchError(f"nothing listens on {port} after {timeout:.0f} s; see {log}")


def write_conf(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def start_apache(apache: Apache, procs: Procs, root: Path, flush: str) -> Side:
    root.mkdir(parents=True)
    (root / "logs").mkdir()
    ns_port, port = free_port(), free_port()
    ns_conf = write_conf(root / "ns.conf", {"listenPort": str(ns_port)})
    ns_log = root / "namesrv.out"
    ns = procs.start(apache.command("org.apache.rocketmq.namesrv.NamesrvStartup", "-c",
                                    str(ns_conf), heap="-Xmx256m", home=str(root)), ns_log,
                     apache.env())
    wait_port(ns_port, ns, ns_log)
    conf = write_conf(root / "broker.conf", {
        "brokerClusterName": "ApacheBench", "brokerName": "apache-bench", "brokerId": "0",
        "brokerRole": "ASYNC_MASTER", "flushDiskType": flush,
        "namesrvAddr": f"127.0.0.1:{ns_port}", "brokerIP1": "127.0.0.1",
        "listenPort": str(port), "storePathRootDir": f"{root}/store",
        "storePathCommitLog": f"{root}/store/commitlog", "autoCreateTopicEnable": "true"})
    log = root / "broker.out"
    broker = procs.start(apache.command("org.apache.rocketmq.broker.BrokerStartup", "-c",
                                        str(conf), heap="-Xms1g -Xmx1g -XX:MaxDirectMemorySize=1g",
                                        home=str(root)), log, apache.env())
    wait_port(port, broker, log)
    return Side("apache", f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}", broker.pid, "ApacheBench")


def start_ours(procs: Procs, root: Path, flush: str) -> Side:
    root.mkdir(parents=True)
    ns_port, port = free_port(), free_port()
    env = {**os.environ, "HOME": str(root), "NAMESRV_ADDR": ""}
    ns_conf = write_conf(root / "ns.conf", {"listenPort": str(ns_port)})
    ns_log = root / "namesrv.out"
    ns = procs.start([sys.executable, "-m", "engine.namesrv.main", "-c", str(ns_conf)], ns_log,
                     env)
    wait_port(ns_port, ns, ns_log)
    conf = write_conf(root / "broker.conf", {
        "brokerClusterName": "OursBench", "brokerName": "ours-bench", "brokerId": "0",
        "brokerRole": "ASYNC_MASTER", "flushDiskType": flush,
        "namesrvAddr": f"127.0.0.1:{ns_port}", "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1", "listenPort": str(port),
        "storePathRootDir": f"{root}/store", "logsDir": f"{root}/logs",
        "autoCreateTopicEnable": "true"})
    log = root / "broker.out"
    broker = procs.start([sys.executable, "-m", "engine.broker.main", "-c", str(conf)], log, env)
    wait_port(port, broker, log)
    return Side("ours", f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}", broker.pid, "OursBench")


def create_topic(apache: Apache, side: Side, topic: str) -> None:
    """`mqadmin updateTopic` through the name server, once the broker has registered."""
    deadline = time.monotonic() + 60
    while True:
        run = subprocess.run([str(apache.home / "mqadmin.sh"), "updateTopic", "-n", side.namesrv,
                              "-c", side.cluster, "-t", topic, "-r", str(QUEUES), "-w",
                              str(QUEUES)], capture_output=True, text=True, timeout=60)
        if run.returncode == 0 and "success" in run.stdout.lower():
            return
        if time.monotonic() > deadline:
            raise BenchError(f"updateTopic {topic} on {side.name}: {run.stdout}{run.stderr}")
        time.sleep(1)


def read_lines(proc: subprocess.Popen[str], pattern: re.Pattern[str], want: int,
               timeout: float) -> list[re.Match[str]]:
    """The first `want` lines of `proc` matching `pattern` (fewer when it ends or times out)."""
    found: list[re.Match[str]] = []
    assert proc.stdout is not None
    done = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = pattern.search(line)
            if m:
                found.append(m)
                if len(found) >= want:
                    break
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    done.wait(timeout)
    return list(found)


def java_client(apache: Apache, procs: Procs, main: str, args: list[str]
                ) -> subprocess.Popen[str]:
    proc = subprocess.Popen(apache.command(main, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=apache.env())
    procs.running.append(proc)
    return proc


@dataclass(frozen=True, slots=True)
class Round:
    tps: float
    avg_rt: float | None = None
    max_rt: float | None = None
    failed: int = 0


def producer_round(apache: Apache, procs: Procs, side: Side, threads: int, lines: int
                   ) -> Round:
    proc = java_client(apache, procs, "org.apache.rocketmq.example.benchmark.Producer",
                       ["-n", side.namesrv, "-t", TOPIC, "-w", str(threads), "-s", "1024"])
    try:
        found = read_lines(proc, SEND_LINE, 1 + lines, timeout=10 * (lines + 1) + 30)
    finally:
        procs.stop(proc, grace=5)
    measured = found[1:]
    if len(measured) < lines:
        raise BenchError(f"Producer against {side.name}: {len(found)} stats lines")
    return Round(tps=statistics.mean(int(m.group(1)) for m in measured),
                 avg_rt=statistics.mean(float(m.group(3)) for m in measured),
                 max_rt=float(measured[-1].group(2)),
                 failed=sum(int(m.group(4)) + int(m.group(5)) for m in measured))


def fill_backlog(apache: Apache, procs: Procs, side: Side, count: int, timeout: float) -> float:
    t0 = time.monotonic()
    proc = java_client(apache, procs, "org.apache.rocketmq.example.benchmark.Producer",
                       ["-n", side.namesrv, "-t", BACKLOG_TOPIC, "-w", "64", "-s", "1024",
                        "-q", str(count)])
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"backlog of {count:,} on {side.name} not written in {timeout:.0f} s"
                         ) from exc
    finally:
        procs.stop(proc, grace=5)
    return count / (time.monotonic() - t0)


async def _consumed(client: RemotingClient, broker: str, group: str) -> int:
    """The group's committed offsets in the backlog topic, summed (-1 before any commit)."""
    total = 0
    for queue in range(QUEUES):
        resp = await client.invoke(broker, request(RequestCode.QUERY_CONSUMER_OFFSET, to_ext(
            QueryConsumerOffsetRequestHeader(group, BACKLOG_TOPIC, queue))), timeout=5)
        if resp.code == ResponseCode.SUCCESS and resp.ext_fields:
            total += max(0, int(resp.ext_fields.get("offset", "0")))
    return total


async def _drain_rate(side: Side, group: str, backlog: int, timeout: float
                      ) -> tuple[float, int]:
    """Messages per second from the first commit of the group's offsets (its second pulls)
    until 99% of the backlog is committed; and how many were committed."""
    client = RemotingClient()
    try:
        deadline = time.monotonic() + timeout
        first: tuple[float, int] | None = None
        done = 0
        while time.monotonic() < deadline:
            done = await _consumed(client, side.broker, group)
            now = time.monotonic()
            if first is None and done > 0:
                first = (now, done)
            if done >= backlog * 0.99 and first is not None and now > first[0]:
                return (done - first[1]) / (now - first[0]), done
            await asyncio.sleep(0.1)
        if first is None or time.monotonic() <= first[0]:
            return 0.0, done
        return (done - first[1]) / (time.monotonic() - first[0]), done
    finally:
        await client.close()


def consumer_round(apache: Apache, procs: Procs, side: Side, group: str, backlog: int,
                   timeout: float) -> Round:
    """The Consumer (a fresh group: from the first offset) draining the backlog, timed by the
    offsets it commits with its pulls (the benchmark's own TPS lines cover 9 s, longer than
    a drain of 1M takes)."""
    proc = java_client(apache, procs, "org.apache.rocketmq.example.benchmark.Consumer",
                       ["-n", side.namesrv, "-t", BACKLOG_TOPIC, "-g", group])
    try:
        rate, done = run(_drain_rate(side, group, backlog, timeout))
    finally:
        procs.stop(proc, grace=5)
    if rate <= 0:
        raise BenchError(f"Consumer against {side.name}: nothing consumed")
    return Round(tps=rate, failed=0 if done >= backlog * 0.99 else backlog - done)


def fmt(r: Round) -> str:
    text = f"{r.tps:>9,.0f}/s"
    if r.avg_rt is not None:
        text += f"  avg RT {r.avg_rt:6.3f} ms  max RT {r.max_rt:5.0f} ms"
    if r.failed:
        text += f"  failed {r.failed}"
    return text


def compare(label: str, rounds: int, run_one: dict[str, object]) -> tuple[float, float]:
    """Alternating rounds; prints each and the medians; returns (ours, apache) medians."""
    results: dict[str, list[Round]] = {"apache": [], "ours": []}
    print(f"\n## {label}", flush=True)
    for i in range(rounds):
        order = ("apache", "ours") if i % 2 == 0 else ("ours", "apache")
        for name in order:
            fn = run_one[name]
            assert callable(fn)
            r = fn(i)
            results[name].append(r)
            print(f"round {i + 1} {name:6} {fmt(r)}  load {os.getloadavg()[0]:.2f}", flush=True)
    med = {n: statistics.median(r.tps for r in rs) for n, rs in results.items()}
    for name, rs in results.items():
        rt = [r.avg_rt for r in rs if r.avg_rt is not None]
        extra = f", avg RT median {statistics.median(rt):.3f} ms" if rt else ""
        mx = [r.max_rt for r in rs if r.max_rt is not None]
        extra += f", max RT max {max(mx):.0f} ms" if mx else ""
        print(f"median {name:6} {med[name]:>9,.0f}/s{extra}")
    print(f"ratio ours/apache {med['ours'] / med['apache']:.2f}", flush=True)
    return med["ours"], med["apache"]


@contextlib.contextmanager
def pair(apache: Apache, procs: Procs, tmp: Path, flush: str, topics: list[str]
         ) -> Iterator[dict[str, Side]]:
    sides = {"apache": start_apache(apache, procs, tmp / f"apache-{flush}", flush),
             "ours": start_ours(procs, tmp / f"ours-{flush}", flush)}
    try:
        for side in sides.values():
            for topic in topics:
                create_topic(apache, side, topic)
        yield sides
    finally:
        procs.stop_all()


def run_all(args: argparse.Namespace, apache: Apache, procs: Procs, tmp: Path) -> list[str]:
    summary: list[str] = []
    chosen = [s for s in SCENARIOS if s in args.scenario]
    async_ones = [s for s in chosen if s != "sync64"]
    if async_ones:
        with pair(apache, procs, tmp, "ASYNC_FLUSH", [TOPIC, BACKLOG_TOPIC]) as sides:
            for threads in (64, 8):
                if f"p{threads}" not in async_ones:
                    continue
                ours, ref = compare(
                    f"Producer -w {threads} -s 1024, ASYNC_FLUSH", args.rounds,
                    {n: (lambda i, s=s, t=threads: producer_round(apache, procs, s, t, args.lines))
                     for n, s in sides.items()})
                summary.append(f"Producer -w {threads}: ours {ours:,.0f}/s, apache {ref:,.0f}/s,"
                               f" ratio {ours / ref:.2f}")
            if "consume" in async_ones:
                print(f"\n## backlog: {args.backlog:,} x 1 KiB into {BACKLOG_TOPIC} "
                      "(Producer -w 64 -q)", flush=True)
                for name, side in sides.items():
                    rate = fill_backlog(apache, procs, side, args.backlog, args.budget * 60)
                    print(f"{name:6} written at {rate:,.0f}/s (JVM start included)", flush=True)
                ours, ref = compare(
                    f"Consumer from a backlog of {args.backlog:,}, ASYNC_FLUSH", args.rounds,
                    {n: (lambda i, s=s: consumer_round(apache, procs, s, f"bench_c{i}_{s.name}",
                                                       args.backlog, 120))
                     for n, s in sides.items()})
                summary.append(f"Consumer: ours {ours:,.0f}/s, apache {ref:,.0f}/s,"
                               f" ratio {ours / ref:.2f}")
    if "sync64" in chosen:
        with pair(apache, procs, tmp, "SYNC_FLUSH", [TOPIC]) as sides:
            ours, ref = compare(
                "Producer -w 64 -s 1024, SYNC_FLUSH", args.rounds,
                {n: (lambda i, s=s: producer_round(apache, procs, s, 64, args.lines))
                 for n, s in sides.items()})
            summary.append(f"Producer -w 64 SYNC_FLUSH: ours {ours:,.0f}/s, apache {ref:,.0f}/s,"
                           f" ratio {ours / ref:.2f}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side (default 3)")
    parser.add_argument("--lines", type=int, default=2,
                        help="measured 10-s stats lines per Producer round (default 2)")
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--budget", type=float, default=60, help="minutes for the whole run")
    args = parser.parse_args()
    home = os.environ.get("APACHE_RMQ_HOME")
    if not home or not Path(home, "env.sh").exists():
        print("APACHE_RMQ_HOME is not set to an Apache RocketMQ 4.9.8 build: build one with "
              "build-apache-rocketmq.sh (see the team's apache-reference notes) and export "
              "APACHE_RMQ_HOME=~/.cache/apache-rocketmq-4.9.8", file=sys.stderr)
        return 2
    apache = Apache.from_env(Path(home))
    procs = Procs()
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"# bench_apache {start}\n{machine()}")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)

    def on_alarm(signum: int, frame: object) -> None:
        raise BenchError(f"over the budget of {args.budget:.0f} minutes")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.alarm(int(args.budget * 60))
    try:
        with tempfile.TemporaryDirectory(prefix="bench_apache") as tmp:
            summary = run_all(args, apache, procs, Path(tmp))
    except (BenchError, KeyboardInterrupt) as exc:
        print(f"stopped: {exc!r}", file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
        procs.stop_all()
    print("\n## summary (medians, ratio ours/apache)")
    print("\n".join(summary))
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
