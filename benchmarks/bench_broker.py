"""Broker throughput and latency over loopback: 1 KiB messages, ASYNC_FLUSH.

Runs `mqbroker` as its own process (the client here takes the other core), then measures:
  * acknowledged SEND_MESSAGE_V2 per second with 64 requests in flight (target 50,000, i.e.
    at most 18 us of broker CPU per message on a 2-core machine);
  * messages per second sent in SEND_BATCH_MESSAGE batches of 32 (target 100,000);
  * messages per second consumed by PULL_MESSAGE, 32 per pull, 4 queues (target 60,000);
  * send latency percentiles at a paced 5,000 sends per second (target p99 < 5 ms).
Beside each rate it prints the broker process's CPU time per message (user + system, from
/proc), which other load on the machine disturbs far less than the rate, and the load average.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from benchmarks.machine import machine, percentile, summary
from benchmarks.processes import broker_process, cpu_seconds, server_pid
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    send_header_v2,
)
from engine.protocol.message import BatchItem, encode_batch_body
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

BODY = b"x" * 1024
TOPIC = "BenchTopic"
QUEUES = 4
RUNS = 5


class CpuMeter:
    """CPU microseconds per message of the broker process and of this (client) process."""

    def __init__(self, addr: str) -> None:
        self.pid = server_pid(addr)
        self.broker: list[float] = []
        self.client: list[float] = []

    def start(self) -> None:
        self._t0 = (cpu_seconds(self.pid), time.process_time())

    def stop(self, messages: int) -> None:
        broker, client = cpu_seconds(self.pid), time.process_time()
        self.broker.append((broker - self._t0[0]) / messages * 1e6)
        self.client.append((client - self._t0[1]) / messages * 1e6)

    def line(self) -> str:
        return (f"  broker CPU {statistics.median(self.broker):.1f} us/msg (min "
                f"{min(self.broker):.1f}), client CPU {statistics.median(self.client):.1f} "
                f"us/msg, load average {os.getloadavg()[0]:.2f}")


def send_cmd(queue_id: int, *, batch: bool = False, body: bytes = BODY) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="BenchPG", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties="UNIQ_KEY\x01AC110001000078308DB1A1B2C3D4E5F6\x02WAIT\x01true\x02TAGS\x01TagA",
        batch=batch)
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    return request(code, to_ext(send_header_v2(header)), body)


async def timed_sends(client: RemotingClient, addr: str, cmds: list[RemotingCommand],
                      in_flight: int, per_request: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    it = iter(cmds)

    async def worker() -> None:
        for cmd in it:
            t0 = time.perf_counter()
            resp = await client.invoke(addr, cmd, timeout=30)
            latencies.append(time.perf_counter() - t0)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send failed: {resp.code} {resp.remark}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return len(cmds) * per_request / (time.perf_counter() - start), latencies


async def bench_sends(addr: str) -> None:
    client = RemotingClient()
    try:
        cmds = [send_cmd(i % QUEUES) for i in range(20_000)]
        await timed_sends(client, addr, cmds[:5000], 64, 1)  # warm-up, creates the topic
        rates, lat = [], []
        meter = CpuMeter(addr)
        for _ in range(RUNS):
            meter.start()
            rate, latencies = await timed_sends(client, addr, cmds, 64, 1)
            meter.stop(len(cmds))
            rates.append(rate)
            lat.extend(latencies)
        print(summary("acknowledged sends, 1 KiB, 64 in flight", rates, "msgs/s", 50_000))
        print(f"  latency p50 {percentile(lat, 50) * 1e3:.2f} ms, "
              f"p99 {percentile(lat, 99) * 1e3:.2f} ms")
        print(meter.line())

        item = BatchItem(flag=0, body=BODY, properties="TAGS\x01TagA")
        batch_body = encode_batch_body([item] * 32)
        batches = [send_cmd(i % QUEUES, batch=True, body=batch_body) for i in range(2000)]
        rates = []
        meter = CpuMeter(addr)
        for _ in range(RUNS):
            meter.start()
            rate, _ = await timed_sends(client, addr, batches, 16, 32)
            meter.stop(len(batches) * 32)
            rates.append(rate)
        print(summary("batch sends, 32 x 1 KiB per request, 16 in flight", rates, "msgs/s",
                      100_000))
        print(meter.line())
    finally:
        await client.close()


async def bench_pull(addr: str) -> None:
    client = RemotingClient()
    try:
        rates = []
        meter = CpuMeter(addr)
        for run_no in range(RUNS):
            group = f"BenchCG{run_no}"

            async def drain(queue_id: int, group: str = group) -> int:
                offset, got = 0, 0
                while True:
                    header = PullMessageRequestHeader(
                        consumer_group=group, topic=TOPIC, queue_id=queue_id,
                        queue_offset=offset, max_msg_nums=32, sys_flag=0x4, commit_offset=0,
                        suspend_timeout_millis=0, sub_version=0, subscription="*",
                        expression_type="TAG")
                    resp = await client.invoke(addr, request(RequestCode.PULL_MESSAGE,
                                                             to_ext(header)), timeout=30)
                    if resp.code != ResponseCode.SUCCESS:
                        return got
                    ext = resp.ext_fields or {}
                    got += int(ext["nextBeginOffset"]) - offset
                    offset = int(ext["nextBeginOffset"])

            start = time.perf_counter()
            meter.start()
            counts = await asyncio.gather(*(drain(q) for q in range(QUEUES)))
            meter.stop(sum(counts))
            rates.append(sum(counts) / (time.perf_counter() - start))
        print(summary(f"pull consume, 32 per pull, {QUEUES} queues ({sum(counts):,} msgs)",
                      rates, "msgs/s", 60_000))
        print(meter.line())
    finally:
        await client.close()


async def bench_paced(addr: str) -> None:
    client = RemotingClient()
    try:
        rate = 5000
        count = rate * 4
        interval = 1 / rate
        latencies: list[float] = []
        pending: set[asyncio.Future[None]] = set()

        async def one(cmd: RemotingCommand) -> None:
            t0 = time.perf_counter()
            resp = await client.invoke(addr, cmd, timeout=30)
            latencies.append(time.perf_counter() - t0)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send failed: {resp.code} {resp.remark}")

        cmds = [send_cmd(i % QUEUES) for i in range(count)]
        start = time.perf_counter()
        for i, cmd in enumerate(cmds):
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.ensure_future(one(cmd))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
        achieved = count / (time.perf_counter() - start)
        p99 = percentile(latencies, 99) * 1e3
        print(f"paced sends at {achieved:,.0f}/s: p50 "
              f"{statistics.median(latencies) * 1e3:.2f} ms, p99 {p99:.2f} ms, "
              f"max {max(latencies) * 1e3:.2f} ms  target p99 < 5 ms: "
              f"{'met' if p99 < 5 else 'MISSED'}")
    finally:
        await client.close()


def main() -> None:
    print(machine())
    with broker_process() as addr:
        run(bench_sends(addr))
        run(bench_pull(addr))
        run(bench_paced(addr))


if __name__ == "__main__":
    main()
