"""One-message sends and receives + acks through the proxy's worker processes (proxyWorkers).

Runs `mqbroker --enable-proxy` with proxyWorkers 1 and 2, each with grpcio's front and with
ours (grpcFront h2; `--front grpcio` or `--front h2` runs one only) (bench_grpc's broker: its
own process, the name server in this one) and measures, with the targets of issue 35:

* one-message SendMessage calls driven by h2load (4 connections x 64 in flight, 1 KiB; every
  message counted in the store afterwards; target 10,000 msgs/s), and a single
  connection's ceiling (1 x 64: one connection is served by one worker);
* per process (the broker, each worker, each worker's join process): CPU per message (user +
  system, from /proc) and its busiest thread's, so the figures for more cores can be
  worked out from the CPU each process spends per message;
* how evenly the connections spread over the workers (each worker's connections to the gRPC
  port, read from /proc while h2load runs);
* receives + acks with 5.3's default acks (one ACK_MESSAGE per entry; target 15,000
  msgs/s), 32 rounds in flight, and with 16 channels at once, as 16 SimpleConsumers;
* with `APACHE_RMQ5_HOME`, the same one-message calls against Apache 5.3.3's `mqbroker
  --enable-proxy`, and the ratio of ours to Apache's.

The machine is shared: the load average is printed with each figure; CPU per message is the
figure that depends least on it.
"""

from __future__ import annotations

import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import bench_grpc as base
from benchmarks.machine import machine, summary
from benchmarks.processes import children, cpu_seconds, namesrv_in_thread, thread_cpu_seconds
from engine.remoting.loop import run

CALLS = 30_000
RUNS = 3
RECEIVE_CONSUMERS = 16
#: (grpcFront, proxyWorkers) side by side: grpcio's front and ours, 1 and 2 workers.
FRONTS = [("grpcio", 1), ("grpcio", 2), ("h2", 1), ("h2", 2)]


def process_tree(broker_pid: int) -> dict[str, int]:
    """The broker, its proxy workers and their join processes, by name."""
    tree = {"broker": broker_pid}
    for i, worker in enumerate(sorted(children(broker_pid, "engine.proxy.worker"))):
        tree[f"worker {i}"] = worker
        for join in children(worker, "engine.proxy.join_process"):
            tree[f"join {i}"] = join
    return tree


def _sockets(pid: int) -> set[int]:
    out = set()
    with os.scandir(f"/proc/{pid}/fd") as fds:
        for fd in fds:
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    return out


def connections_per_worker(tree: dict[str, int], port: int) -> list[int]:
    """How many connections to `port` each worker (its join, if it has one) holds now."""
    accepted: dict[int, int] = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "01" and int(parts[1].split(":")[1], 16) == port:
                accepted[int(parts[9])] = 1
    holders = "join" if any(name.startswith("join") for name in tree) else "worker"
    return [sum(1 for inode in _sockets(pid) if inode in accepted)
            for name, pid in sorted(tree.items()) if name.startswith(holders)]


def h2load_sends(endpoint: str, tree: dict[str, int], label: str, *, connections: int,
                 streams: int, stored: base.Callable[[], int] | None) -> float:
    """One-message SendMessage calls by h2load: prints the rate, the CPU per message of
    each process and of its busiest thread, and the connections' spread; returns the
    median rate (NaN without h2load)."""
    tool = base.shutil.which("h2load")
    if tool is None:
        print(f"{label}: skipped (h2load, from nghttp2-client, is not installed)")
        return float("nan")
    port = int(endpoint.rsplit(":", 1)[1])
    with tempfile.TemporaryDirectory() as tmp:
        frame = base.request_for(0).SerializeToString()
        body = Path(tmp, "send.bin")
        body.write_bytes(b"\0" + struct.pack(">I", len(frame)) + frame)
        command = [tool, "-n", str(CALLS), "-c", str(connections), "-m", str(streams),
                   "-d", str(body)]
        for key, value in [("content-type", "application/grpc"), ("te", "trailers"),
                           *base.HEADERS]:
            command += ["-H", f"{key}: {value}"]
        command.append(f"http://{endpoint}/apache.rocketmq.v2.MessagingService/SendMessage")

        def once() -> tuple[float, dict[str, float], dict[str, float], list[int]]:
            before = stored() if stored else 0
            cpu0 = {n: cpu_seconds(p) for n, p in tree.items()}
            threads0 = {n: thread_cpu_seconds(p) for n, p in tree.items()}
            start = time.perf_counter()
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            spread: list[int] = []
            deadline = start + 0.5
            while proc.poll() is None and time.perf_counter() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                spread = connections_per_worker(tree, port)
            out, _ = proc.communicate()
            elapsed = time.perf_counter() - start
            done = next(line for line in out.splitlines() if line.startswith("requests:"))
            if f"{CALLS} succeeded" not in done:
                raise SystemExit(f"h2load: {done}")
            if stored is not None and stored() - before != CALLS:
                raise SystemExit(f"{stored() - before} messages stored of {CALLS} sent")
            cpu = {n: (cpu_seconds(p) - cpu0[n]) / CALLS * 1e6 for n, p in tree.items()}
            busiest = {}
            for n, p in tree.items():
                now = thread_cpu_seconds(p)
                busiest[n] = max((v - threads0[n].get(t, 0.0) for t, v in now.items()),
                                 default=float("nan")) / CALLS * 1e6
            return CALLS / elapsed, cpu, busiest, spread

        once()  # warm-up
        runs = [once() for _ in range(RUNS)]
    rates = [r[0] for r in runs]
    print(summary(label, rates, "msgs/s", 10_000 if connections > 1 else None))
    total = statistics.median(sum(r[1].values()) for r in runs)
    print(f"  all processes CPU {total:.1f} us/msg; load average {os.getloadavg()[0]:.2f}")
    for name in tree:
        print(f"    {name:<9} CPU {statistics.median(r[1][name] for r in runs):6.1f} us/msg, "
              f"busiest thread {statistics.median(r[2][name] for r in runs):6.1f} us/msg")
    if len(tree) > 2:
        print(f"  connections per worker while it ran: {[r[3] for r in runs]}")
    return statistics.median(rates)


async def bench_receive(endpoint: str, tree: dict[str, int], channels: int,
                        in_flight: int) -> None:
    """Receive + ack rounds (5.3's default acks: one ACK_MESSAGE per entry)."""
    chans = [base.grpc.aio.insecure_channel(endpoint, options=[
        ("grpc.use_local_subchannel_pool", 1)]) for _ in range(channels)]
    stubs = [base.service_pb2_grpc.MessagingServiceStub(c) for c in chans]
    try:
        await base.timed_receive(stubs, 2.0, in_flight)  # warm-up
        rates, server_cpu, client_cpu = [], [], []
        for _ in range(RUNS):
            cpu0 = sum(cpu_seconds(p) for p in tree.values())
            c0 = time.process_time()
            acked, elapsed, _ = await base.timed_receive(stubs, base.SECONDS, in_flight)
            if acked < 1000:
                raise SystemExit("the topic ran out of messages: raise FILL")
            server_cpu.append((sum(cpu_seconds(p) for p in tree.values()) - cpu0) / acked * 1e6)
            client_cpu.append((time.process_time() - c0) / acked * 1e6)
            rates.append(acked / elapsed)
        print(summary(f"ReceiveMessage (32) + AckMessage, 5.3's default acks, {in_flight} "
                      f"rounds in flight on {channels} channels (raw stubs)", rates, "msgs/s",
                      15_000))
        print(f"  broker+workers CPU {statistics.median(server_cpu):.1f} us/msg, client "
              f"(this process) {statistics.median(client_cpu):.1f} us/msg; load average "
              f"{os.getloadavg()[0]:.2f}")
    finally:
        for channel in chans:
            await channel.close()


def main(fronts: list[tuple[str, int]]) -> None:
    print(machine())
    ours: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, namesrv_in_thread(tmp) as ns_addr:
        for front, workers in fronts:
            with base.broker_with_proxy(tmp, ns_addr, {"proxyWorkers": workers,
                                                       "grpcFront": front}) as (
                    endpoint, pid, broker):
                tree = process_tree(pid)
                per_worker = 2 if front == "grpcio" else 1  # grpcio's needs a join process
                while len(tree) < 1 + per_worker * workers:  # the port listens before
                    time.sleep(0.1)
                    tree = process_tree(pid)
                label = f"grpcFront={front}, proxyWorkers={workers}"

                def count(addr: str = broker) -> int:
                    return run(base.stored_count(addr))

                ours[label] = h2load_sends(
                    endpoint, tree, f"{label}: SendMessage, one 1 KiB "
                    "message per call, 4 connections x 64 in flight (h2load)",
                    connections=4, streams=64, stored=count)
                h2load_sends(endpoint, tree, f"{label}: one connection's "
                             "ceiling, 1 connection x 64 in flight (h2load)",
                             connections=1, streams=64, stored=count)
                if workers == 2:
                    print(f"{label}:")
                    run(base.fill_for_receive(endpoint))
                    run(bench_receive(endpoint, tree, base.CHANNELS,
                                      base.RECEIVE_IN_FLIGHT))
                    run(base.fill_for_receive(endpoint))
                    run(bench_receive(endpoint, tree, RECEIVE_CONSUMERS,
                                      RECEIVE_CONSUMERS))
    home = os.environ.get("APACHE_RMQ5_HOME")
    if home:
        apache = bench_apache5(home)
        for label, rate in ours.items():
            print(f"{label} / Apache 5.3.3: {rate / apache:.2f}")


def bench_apache5(home: str) -> float:
    """Apache 5.3.3's broker with its proxy, the same h2load run; its median rate."""
    with tempfile.TemporaryDirectory() as tmp:
        ns_port, broker_port, grpc_port, remoting_port = (base.free_port(), base.free_port(),
                                                          base.free_port(), base.free_port())
        ns = f"127.0.0.1:{ns_port}"
        Path(tmp, "ns.conf").write_text(f"listenPort={ns_port}\n")
        Path(tmp, "broker.conf").write_text("\n".join([
            "brokerClusterName=BenchCluster", "brokerName=bench-apache", "brokerId=0",
            f"listenPort={broker_port}", "brokerIP1=127.0.0.1", f"namesrvAddr={ns}",
            f"storePathRootDir={tmp}/store", "flushDiskType=ASYNC_FLUSH", ""]))
        Path(tmp, "proxy.json").write_text(base.json.dumps({
            "rocketMQClusterName": "BenchCluster", "namesrvAddr": ns,
            "grpcServerPort": grpc_port, "remotingListenPort": remoting_port}))
        env = {**os.environ, "JAVA_OPT_EXT": f"-Duser.home={tmp}",
               "RMQ_HEAP": "-Xms512m -Xmx512m"}
        procs = [subprocess.Popen([f"{home}/mqnamesrv.sh", "-c", f"{tmp}/ns.conf"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
        try:
            base.asyncio.run(base.wait_listening(ns_port, procs[0]))
            procs.append(subprocess.Popen(
                [f"{home}/mqbroker.sh", "-n", ns, "-c", f"{tmp}/broker.conf",
                 "--enable-proxy", "-pc", f"{tmp}/proxy.json"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=env))
            base.asyncio.run(base.wait_listening(grpc_port, procs[1]))
            run(base.create_topic(f"127.0.0.1:{broker_port}", ns))
            java = base._java_pid(procs[1].pid)
            return h2load_sends(
                f"127.0.0.1:{grpc_port}", {"Apache broker+proxy (JVM)": java},
                "Apache 5.3.3's mqbroker --enable-proxy: one message per call, 4 x 64 (h2load)",
                connections=4, streams=64,
                stored=lambda: run(base.stored_count(f"127.0.0.1:{broker_port}")))
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                proc.wait(60)


if __name__ == "__main__":
    if sys.argv[1:] == ["--apache-only"]:
        bench_apache5(os.environ["APACHE_RMQ5_HOME"])
    elif sys.argv[1:2] == ["--front"] and len(sys.argv) == 3:  # one front only
        main([(front, workers) for front, workers in FRONTS if front == sys.argv[2]])
    else:
        main(FRONTS)
