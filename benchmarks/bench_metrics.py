"""The broker's Prometheus metrics: what they cost the send path, and how long a scrape takes.

Four measurements:
  * the send path's new code with metrics off (a message size bucket and sum in
    `BrokerStats.on_put`, kept whether or not metrics are on): `on_put` timed alone, in ns;
  * what rocketmq_rpc_latency's timing (installed only with metrics on) does per answered
    send: `TimedDispatcher.count` over a read of 64 acknowledged sends, in ns per send;
  * send-path cost, against real `mqbroker` processes (ASYNC_FLUSH, loopback): one broker
    with metricsExporterType=DISABLE and one with PROM, measured in alternating rounds (the
    machine is shared, so rounds of both interleave) of acknowledged 1 KiB SEND_MESSAGE_V2
    with 64 in flight; the figure is the broker process's CPU time per message (user +
    system, /proc), steadier than the rate.  Target: PROM adds <= 1 us/msg.  Nobody scrapes
    during these rounds: the cost measured is the send path's.
  * scrape time: a PROM broker holding 1,000 topics (two puts each, 4 queues) and 300
    consumer groups (each committed on 4 topics, one message behind) answers GET /metrics;
    medians and percentiles of the whole HTTP round trip, and the broker's CPU per scrape.
    Target: < 200 ms.
Run: python -m benchmarks.bench_metrics [--rounds N] [--scrapes N] [--skip-send]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import tempfile
import time
import timeit
from bisect import bisect_left

import httpx

from benchmarks.bench_broker import QUEUES, CpuMeter, send_cmd, timed_sends
from benchmarks.machine import machine, percentile
from benchmarks.processes import broker_process, cpu_seconds, server_pid
from engine.broker.config import BrokerConfig
from engine.broker.metrics.rpc import RpcLatency, TimedDispatcher
from engine.broker.router import build_router
from engine.broker.state import BrokerState
from engine.broker.stats import SIZE_BUCKETS, BrokerStats
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.broker import PullMessageRequestHeader
from engine.protocol.send_answer import send_answer
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run
from engine.store.config import MessageStoreConfig

SENDS_PER_ROUND = 60_000  # /proc counts CPU in 10 ms ticks: 0.17 us per message
TOPICS = 1000
GROUPS = 300
TOPICS_PER_GROUP = 4


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prom_settings(port: int) -> dict[str, str]:
    return {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": str(port)}


async def send_rounds(addrs: dict[str, str], rounds: int) -> dict[str, list[float]]:
    client = RemotingClient()
    try:
        cmds = [send_cmd(i % QUEUES) for i in range(SENDS_PER_ROUND)]
        for addr in addrs.values():
            await timed_sends(client, addr, cmds[:5000], 64, 1)  # warm-up, creates the topic
        meters = {name: CpuMeter(addr) for name, addr in addrs.items()}
        order = list(addrs)
        for round_no in range(rounds):
            for name in order if round_no % 2 == 0 else reversed(order):
                meter = meters[name]
                meter.start()
                await timed_sends(client, addrs[name], cmds, 64, 1)
                meter.stop(len(cmds))
        return {name: meter.broker for name, meter in meters.items()}
    finally:
        await client.close()


def bench_on_put() -> None:
    stats = BrokerStats()
    stats.on_put("BenchTopic", 1, 1024)
    runs = [timeit.timeit(lambda: stats.on_put("BenchTopic", 1, 1024), number=200_000) / 200_000
            for _ in range(7)]
    sizes = stats.size_histogram("BenchTopic")
    assert sizes is not None
    # the statements on_put gained, run inline as on_put runs them
    added = [timeit.timeit(
        "avg = size // nums if nums else size\n"
        "sizes[bisect_left(SIZE_BUCKETS, avg)] += 1\n"
        "sizes[-1] += avg",
        globals={"sizes": sizes, "size": 1024, "nums": 1, "bisect_left": bisect_left,
                 "SIZE_BUCKETS": SIZE_BUCKETS}, number=1_000_000) / 1_000_000
        for _ in range(7)]
    print(f"BrokerStats.on_put (per send): median {statistics.median(runs) * 1e9:.0f} ns "
          f"(min {min(runs) * 1e9:.0f}, 7 runs); of which the size bucket and sum it now "
          f"keeps: median {statistics.median(added) * 1e9:.0f} ns (min "
          f"{min(added) * 1e9:.0f})")


def bench_rpc_count() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig(broker_ip1="127.0.0.1", logs_dir=tmp)
        state = BrokerState(config, MessageStoreConfig(store_path_root_dir=tmp))
        dispatcher = TimedDispatcher(build_router(), state, RpcLatency())
        answer = send_answer(config.region_id, config.trace_on).encode(
            1, "7F00000100002A9F0000000000000000", 0, 1)
        run = [send_cmd(i % QUEUES) for i in range(64)]  # a read's sends, one run
        answered = [(run, [answer] * len(run))]
        start = time.perf_counter()
        runs = [timeit.timeit(lambda: dispatcher.count(answered, start, False), number=2000)
                / (2000 * len(run)) for _ in range(7)]
    print(f"rpc latency counting (per acknowledged send, reads of 64): median "
          f"{statistics.median(runs) * 1e9:.0f} ns (min {min(runs) * 1e9:.0f}, 7 runs)")


def bench_send_path(rounds: int) -> None:
    metrics_port = _port()
    with broker_process() as off, broker_process(**prom_settings(metrics_port)) as on:
        cpu = run(send_rounds({"DISABLE": off, "PROM": on}, rounds))
    med = {name: statistics.median(values) for name, values in cpu.items()}
    for name, values in cpu.items():
        print(f"  {name:8s} broker CPU per message: median {med[name]:.2f} us "
              f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} rounds of "
              f"{SENDS_PER_ROUND:,} acknowledged 1 KiB sends)")
    diffs = [b - a for a, b in zip(cpu["DISABLE"], cpu["PROM"], strict=True)]
    added = med["PROM"] - med["DISABLE"]
    print(f"send path with metrics on: {added:+.2f} us/msg (difference of medians; per-round "
          f"differences median {statistics.median(diffs):+.2f}, min {min(diffs):+.2f}, max "
          f"{max(diffs):+.2f})  target <= +1 us: {'met' if added <= 1.0 else 'MISSED'}  "
          f"load average {os.getloadavg()[0]:.2f}")


async def populate(addr: str) -> None:
    client = RemotingClient()
    try:
        topics = [f"BenchTopic{i:04d}" for i in range(TOPICS)]
        # two puts on queue 0 of every topic (auto-created with 4 queues)
        cmds = [send_cmd(0) for _ in range(2)]
        sends = []
        for topic in topics:
            for cmd in cmds:
                fields = dict(cmd.ext_fields or {})
                fields["b"] = topic  # SEND_MESSAGE_V2's topic
                sends.append(request(cmd.code, fields, cmd.body))
        await timed_sends(client, addr, sends, 64, 1)

        async def commit(group: str, topic: str) -> None:
            header = PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=0, queue_offset=1,
                max_msg_nums=1, sys_flag=0x4 | 0x1, commit_offset=1,
                suspend_timeout_millis=0, sub_version=0, subscription="*",
                expression_type="TAG")
            resp = await client.invoke(addr, request(RequestCode.PULL_MESSAGE, to_ext(header)),
                                       timeout=30)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"pull failed: {resp.code} {resp.remark}")

        pairs = [(f"BenchGroup{g:03d}", topics[(g * TOPICS_PER_GROUP + k) % TOPICS])
                 for g in range(GROUPS) for k in range(TOPICS_PER_GROUP)]
        for start in range(0, len(pairs), 64):
            await asyncio.gather(*(commit(g, t) for g, t in pairs[start:start + 64]))
    finally:
        await client.close()


def bench_scrape(scrapes: int) -> None:
    metrics_port = _port()
    with broker_process(**prom_settings(metrics_port)) as addr:
        run(populate(addr))
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        times, cpu = [], []
        pid = server_pid(addr)
        with httpx.Client(timeout=30) as http:
            body = http.get(url).text  # warm-up
            for _ in range(scrapes):
                c0, t0 = cpu_seconds(pid), time.perf_counter()
                resp = http.get(url)
                times.append((time.perf_counter() - t0) * 1e3)
                cpu.append((cpu_seconds(pid) - c0) * 1e3)
                resp.raise_for_status()
        samples = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        med = statistics.median(times)
        print(f"scrape of {TOPICS:,} topics and {GROUPS} groups ({GROUPS * TOPICS_PER_GROUP:,} "
              f"group-topic pairs; {samples:,} samples, {len(body) / 1024:,.0f} KiB): median "
              f"{med:.1f} ms, p90 {percentile(times, 90):.1f} ms, p99 "
              f"{percentile(times, 99):.1f} ms, max {max(times):.1f} ms ({scrapes} scrapes)  "
              f"target < 200 ms: {'met' if med < 200 else 'MISSED'}")
        print(f"  broker CPU per scrape: median {statistics.median(cpu):.0f} ms, p90 "
              f"{percentile(cpu, 90):.0f} ms (10 ms ticks), load average "
              f"{os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_metrics",
                                     description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=8,
                        help="alternating send rounds per broker (default 8)")
    parser.add_argument("--scrapes", type=int, default=50, help="timed scrapes (default 50)")
    parser.add_argument("--skip-send", action="store_true", help="only the scrape benchmark")
    args = parser.parse_args()
    print(machine())
    if not args.skip_send:
        bench_on_put()
        bench_rpc_count()
        bench_send_path(args.rounds)
    bench_scrape(args.scrapes)


if __name__ == "__main__":
    main()
