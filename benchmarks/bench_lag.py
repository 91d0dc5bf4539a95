"""The lag collector's cycle against a local cluster: groups x queues, wall time and CPU.

Runs `mqnamesrv` and `mqbroker` as processes of their own, creates topics of 8 queues
(QUEUES / 8 of them) and GROUPS consumer groups (each with its retry topic, so the name
server lists it), group i consuming topic i mod topics with an offset committed on each of
its 8 queues; every queue holds one message and half the groups have not consumed it, so
those queues have lag and need a time-lag read.  Then it runs the whole collector cycle
(sampling, retention forecast, SQLite window, Parquet buffer, verdicts) CYCLES times and
prints the median and p90 of the cycle's wall time, of this process's CPU time per cycle
(`time.process_time`) and of the servers' CPU time per cycle (/proc), the first cycle
(cold: every time-lag read) apart.  The targets: a 500 x 1,000 cycle within 2 s; on the big
cluster of `benchmarks.big_cluster` (3,000 groups, 10,000 topics of 8 queues on two broker
sets, 24,000 group-queue samples a cycle) within 5 s at no more than 25% of one core (CPU
per cycle over the default 10 s interval).

    python -m benchmarks.bench_lag                 # the big cluster (two broker sets)
    python -m benchmarks.bench_lag -n ADDR         # a big cluster big_cluster keeps
    python -m benchmarks.bench_lag small           # 50x100 and 500x1000, one broker
    python -m benchmarks.bench_lag 200 400         # one size: groups queues, one broker
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import big_cluster as big
from benchmarks.bench_client import namesrv_process
from benchmarks.machine import machine, percentile
from benchmarks.processes import broker_process
from engine.client import ClientConfig, Message, MessageQueue, Producer
from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.protocol.body.topic import TopicConfig
from engine.remoting.loop import run
from mqadmin.operations.lag.collector import CollectorConfig, LagCollector

CYCLES = 7
PER_TOPIC = 8
SIZES = ((50, 100), (500, 1000))
SETUP_CONCURRENCY = 32


async def prepare(namesrv: str, broker: str, groups: int, queues: int) -> int:
    """Topics, groups, one message per queue, offsets; returns the queue samples a cycle
    should see."""
    topics = [f"LagBench{t:04d}" for t in range(max(queues // PER_TOPIC, 1))]
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)
    async with MQAdmin(namesrv) as admin:
        async def create(topic: str, n: int) -> None:
            async with gate:
                await admin.broker.create_topic(broker, TopicConfig(topic, n, n))

        retry = [f"%RETRY%lag-bench-{g:04d}" for g in range(groups)]
        await asyncio.gather(*(create(t, PER_TOPIC) for t in topics),
                             *(create(t, 1) for t in retry))
        wanted = set(topics) | set(retry)

        for _ in range(600):  # the broker re-registers its topics every 30 s at most
            try:
                listed = set((await admin.namesrv.all_topics()).topic_list)
            except ClientError:
                listed = set()
            if len(listed & wanted) == len(wanted):
                break
            await asyncio.sleep(0.1)

        producer = Producer("lag-bench-producer", ClientConfig(namesrv_addr=namesrv))
        await producer.start()
        try:
            async def fill(topic: str, queue_id: int) -> None:
                async with gate:
                    await producer.send_to_queue(Message(topic, b"x"),
                                                 MessageQueue(topic, "bench-broker", queue_id))

            await asyncio.gather(*(fill(t, q) for t in topics for q in range(PER_TOPIC)))
        finally:
            await producer.shutdown()

        async def commit(g: int) -> None:
            topic = topics[g % len(topics)]
            async with gate:
                for q in range(PER_TOPIC):
                    await admin.broker.update_consumer_offset(
                        broker, f"lag-bench-{g:04d}", topic, q, g % 2)  # odd: caught up

        await asyncio.gather(*(commit(g) for g in range(groups)))
    return groups * PER_TOPIC


def servers_cpu() -> float:
    """CPU seconds used so far by this process's children (the name server and broker)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():  # ppid
            total += int(fields[11]) + int(fields[12])  # utime + stime, in ticks
    return total / os.sysconf("SC_CLK_TCK")


async def measure(namesrv: str, groups: int, queues: int, expected: int, *,
                  children: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = CollectorConfig((namesrv,), "bench", 10_000, Path(tmp),
                                 db_path=Path(tmp, "mqadmin.db"), flush_cycles=CYCLES + 1)
        collector = LagCollector(config)
        await collector.open()
        try:
            walls: list[float] = []
            cpus: list[float] = []
            servers: list[float] = []
            for _ in range(CYCLES + 1):
                wall, cpu, srv = time.perf_counter(), time.process_time(), servers_cpu()
                cycle = await collector.cycle()
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                servers.append(servers_cpu() - srv)
                if len(cycle.samples) != expected or cycle.gaps:
                    raise SystemExit(f"cycle saw {len(cycle.samples)} queue samples and "
                                     f"{len(cycle.gaps)} gaps, expected {expected} and 0")
        finally:
            await collector.close()
    first_wall, first_cpu, first_srv = walls.pop(0), cpus.pop(0), servers.pop(0)
    print(f"{groups} groups x {queues} queues ({expected} group-queue samples a cycle, "
          f"{len(cycle.groups)} groups listed):")
    print(f"  cycle wall time: median {statistics.median(walls):.3f} s, p90 "
          f"{percentile(walls, 90):.3f} s, max {max(walls):.3f} s ({CYCLES} cycles); "
          f"first (cold) {first_wall:.3f} s")
    print(f"  collector CPU per cycle: median {statistics.median(cpus):.3f} s, p90 "
          f"{percentile(cpus, 90):.3f} s; first {first_cpu:.3f} s")
    if children:
        print(f"  name server + broker CPU per cycle: median {statistics.median(servers):.3f} "
              f"s, p90 {percentile(servers, 90):.3f} s; first {first_srv:.3f} s")
    print(f"  share of one core at a 10 s interval: "
          f"{statistics.median(cpus) / 10 * 100:.0f}%; load average {os.getloadavg()[0]:.1f}",
          flush=True)


def main() -> None:
    print(machine(), flush=True)
    args = sys.argv[1:]
    big_size = (big.GROUPS, big.TOPICS * big.QUEUES_PER_BROKER * len(big.BROKER_SETS))
    expected = big.GROUPS * big.QUEUES_PER_BROKER * len(big.BROKER_SETS)
    if args[:1] == ["-n"] and len(args) == 2:
        run(measure(args[1], *big_size, expected, children=False))
        return
    if not args:
        with big.big_cluster() as cluster:
            run(measure(cluster.namesrv, *big_size, expected))
        return
    sizes = [(int(args[0]), int(args[1]))] if len(args) == 2 else list(SIZES)
    for groups, queues in sizes:
        with namesrv_process() as namesrv, broker_process(namesrvAddr=namesrv) as broker:
            found = run(prepare(namesrv, broker, groups, queues))
            run(measure(namesrv, groups, queues, found))


if __name__ == "__main__":
    main()
