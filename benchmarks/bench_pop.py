"""POP consumption end to end: pop 32 + ack of 1 KiB messages with one consumer.

Runs `mqnamesrv` and `mqbroker` as processes of their own (or uses a running cluster:
`--namesrv ADDR --broker ADDR`, e.g. Apache 5.3.3's, to compare), stores the messages of a
run first (batch sends), then times one `PopConsumer` that listens with a no-op listener
until every message was consumed and its batch ack answered.  Each run is a new group that
starts at the first offset.  Prints the median messages per second (the issue's target:
at least 20,000), the client's and the broker's CPU per message, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Iterator

from benchmarks.bench_client import (
    BATCH,
    TOPIC,
    batches,
    namesrv_process,
    prepare,
)
from benchmarks.machine import machine
from benchmarks.processes import broker_process, cpu_seconds, server_pid
from engine.client import ClientConfig, Producer
from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.pop_consumer import PopConsumer
from engine.client.core.message import MessageExt
from engine.client.core.results import ConsumeConcurrentlyStatus
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.remoting.loop import run

RUNS = 5
MESSAGES = 32_768
POP_BATCH = 32
RECEIVERS = 4


async def consume(config: ClientConfig, group: str, count: int, receivers: int) -> None:
    done = asyncio.Event()
    seen = 0

    def listener(msg: MessageExt) -> ConsumeConcurrentlyStatus:
        nonlocal seen
        seen += 1
        if seen >= count:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PopConsumer(group, config, options=PopOptions(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pop_batch_size=POP_BATCH,
        receivers=receivers, poll_time_millis=1000))
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        consumer.listen(listener)
        await asyncio.wait_for(done.wait(), 600)
    finally:
        await consumer.shutdown()  # waits for the last batch acks


async def bench(namesrv: str, broker: str, pid: int | None, runs: int, count: int,
                receivers: int) -> None:
    await prepare(namesrv, broker)
    config = ClientConfig(namesrv_addr=namesrv)
    producer = Producer("PopBenchPG", config)
    await producer.start()
    rates, client_cpu, broker_cpu = [], [], []
    try:
        for run_no in range(runs):
            await batches(producer, 8, count, BATCH)
            group = f"PopBenchCG{run_no}_{int(time.time())}"
            b0 = cpu_seconds(pid) if pid else float("nan")
            c0, w0 = time.process_time(), time.perf_counter()
            await consume(config, group, count, receivers)
            wall = time.perf_counter() - w0
            rates.append(count / wall)
            client_cpu.append((time.process_time() - c0) / count * 1e6)
            broker_cpu.append(((cpu_seconds(pid) - b0) if pid else float("nan")) / count * 1e6)
            print(f"  run {run_no + 1}: {rates[-1]:,.0f} msgs/s, client {client_cpu[-1]:.1f} "
                  f"us/msg, broker {broker_cpu[-1]:.1f} us/msg")
    finally:
        await producer.shutdown()
    print(f"pop {POP_BATCH} + batch ack, 1 KiB, one consumer, {receivers} pops in flight: "
          f"median {statistics.median(rates):,.0f} msgs/s (min {min(rates):,.0f}, max "
          f"{max(rates):,.0f}); client {statistics.median(client_cpu):.1f} us CPU/msg; "
          f"broker {statistics.median(broker_cpu):.1f} us CPU/msg; {runs} runs of {count:,}; "
          f"load average {os.getloadavg()[0]:.1f}")


@contextlib.contextmanager
def cluster(namesrv: str | None, broker: str | None) -> Iterator[tuple[str, str, int | None]]:
    if namesrv and broker:
        yield namesrv, broker, None
        return
    with namesrv_process() as ns, broker_process(namesrvAddr=ns) as addr:
        yield ns, addr, server_pid(addr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--messages", type=int, default=MESSAGES, help="messages a run")
    parser.add_argument("--receivers", type=int, default=RECEIVERS, help="pops in flight")
    parser.add_argument("--namesrv", help="use this cluster's name server (with --broker)")
    parser.add_argument("--broker", help="the broker address of that cluster")
    parser.add_argument("--broker-pid", type=int, help="that broker's pid, for its CPU")
    args = parser.parse_args()
    print(machine())
    with cluster(args.namesrv, args.broker) as (namesrv, broker, pid):
        run(bench(namesrv, broker, pid or args.broker_pid, args.runs, args.messages,
                  args.receivers))


if __name__ == "__main__":
    main()
