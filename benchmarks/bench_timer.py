"""Timer messages (5.x "delay at any time"): enqueue rate and delivery punctuality.

Runs `mqbroker` as its own process (this process is the producer and, afterwards, the
consumer), then, `RUNS` times for each timer precision in `PRECISIONS`:
  * enqueue: `TIMERS` acknowledged SEND_MESSAGE_V2 of 1 KiB with TIMER_DELIVER_MS, 64 in flight
    (target >= 20,000 msgs/s), timed until the broker's wheel holds them all
    (timerOffsetBehind 0);
  * delivery: their times are spread evenly over `SPREAD_S` seconds starting `LEAD_S` seconds
    after the first send; once the last is due, every delivered message is pulled and its
    lateness is its store time in the real queue minus the time it asked for (target: every
    one within 1 s, none early).
Beside each figure it prints the broker process's CPU time per message (user + system, from
/proc): for the enqueue, sends plus wheel enqueue; for the delivery, the delivery window
(idle time included).  Also the machine and its load average (other work shares it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from benchmarks.machine import machine, percentile, summary
from benchmarks.processes import broker_process, cpu_seconds, server_pid
from engine.protocol import fastjson
from engine.protocol.body.route import KVTable
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
from engine.remoting.loop import run

TIMERS = 100_000
BODY = b"x" * 1024
QUEUES = 4
LEAD_S = 12
SPREAD_S = 30
RUNS = 3
PRECISIONS = (1000,)  # 5.3's default (the slot width; delivery is at each timer's own time)


def now_ms() -> int:
    return int(time.time() * 1000)


def send_cmd(n: int, deliver_at: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="TimerBenchPG", topic="TimerBench", default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=n % QUEUES, sys_flag=0,
        born_timestamp=now_ms(), flag=0,
        properties=f"TIMER_DELIVER_MS\x01{deliver_at}\x02KEYS\x01{n}\x02WAIT\x01true",
        batch=False)
    return request(RequestCode.SEND_MESSAGE_V2, to_ext(send_header_v2(header)), BODY)


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=10)
    return dict(from_json(KVTable, fastjson.loads(resp.body or b"")).table)


async def send_all(client: RemotingClient, addr: str, cmds: list[RemotingCommand]) -> None:
    it = iter(cmds)

    async def worker() -> None:
        for cmd in it:
            resp = await client.invoke(addr, cmd, timeout=30)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send failed: {resp.code} {resp.remark}")

    await asyncio.gather(*(worker() for _ in range(64)))


async def drain(client: RemotingClient, addr: str, queue_id: int, group: str,
                asked: dict[int, int]) -> list[int]:
    """Lateness (ms) of every message of one queue."""
    late: list[int] = []
    offset = 0
    while True:
        header = PullMessageRequestHeader(
            consumer_group=group, topic="TimerBench", queue_id=queue_id, queue_offset=offset,
            max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
            sub_version=0, subscription="*", expression_type="TAG")
        resp = await client.invoke(addr, request(RequestCode.PULL_MESSAGE, to_ext(header)),
                                   timeout=30)
        if resp.code != ResponseCode.SUCCESS:
            return late
        records = decode_records(resp.body or b"")
        for r in records:
            late.append(r.store_timestamp - asked[int(r.properties()["KEYS"])])
        offset += len(records)


async def one_run(addr: str, run_no: int) -> tuple[float, float, float, list[int]]:
    """(enqueue msgs/s, enqueue broker CPU us/msg, delivery broker CPU us/msg, lateness)."""
    pid = server_pid(addr)
    client = RemotingClient()
    try:
        start = now_ms() + LEAD_S * 1000
        asked = {n: start + n * SPREAD_S * 1000 // TIMERS for n in range(TIMERS)}
        order = list(range(TIMERS))
        order = order[::2] + order[1::2]  # not in delivery order
        cmds = [send_cmd(n, asked[n]) for n in order]
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        await send_all(client, addr, cmds)
        while (await runtime(client, addr)).get("timerOffsetBehind") != "0":
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - t0
        enqueue_cpu = (cpu_seconds(pid) - cpu0) / TIMERS * 1e6
        if now_ms() > start:
            print(f"  (run {run_no}: enqueue ran past the first delivery time)")
        await asyncio.sleep(max(start - now_ms(), 0) / 1000)
        cpu1 = cpu_seconds(pid)
        await asyncio.sleep((start + SPREAD_S * 1000 + 2_000 - now_ms()) / 1000)
        while int((await runtime(client, addr)).get("timerCongestNum", "1")) > 0:
            await asyncio.sleep(0.1)
        deliver_cpu = (cpu_seconds(pid) - cpu1) / TIMERS * 1e6
        late: list[int] = []
        for q in range(QUEUES):
            late += await drain(client, addr, q, f"TimerBenchCG{run_no}", asked)
        if len(late) != TIMERS:
            raise SystemExit(f"delivered {len(late)} of {TIMERS}")
        return TIMERS / elapsed, enqueue_cpu, deliver_cpu, late
    finally:
        await client.close()


def report(precision: int, results: list[tuple[float, float, float, list[int]]]) -> None:
    rates = [r[0] for r in results]
    late = [x for r in results for x in r[3]]
    print(f"timerPrecisionMs={precision}")
    print("  " + summary(f"{TIMERS:,} timers enqueued (sent, acknowledged, in the wheel)",
                         rates, "msgs/s", 20_000))
    print(f"    broker CPU {statistics.median(r[1] for r in results):.1f} us/msg "
          f"(min {min(r[1] for r in results):.1f})")
    within = sum(1 for x in late if 0 <= x <= 1000)
    print(f"  delivered {len(late):,}: lateness p50 {percentile(late, 50):.0f} ms, "
          f"p99 {percentile(late, 99):.0f} ms, max {max(late)} ms, min {min(late)} ms; "
          f"within 1 s: {within / len(late):.4%}  target 100%: "
          f"{'met' if within == len(late) else 'MISSED'}")
    print(f"    broker CPU {statistics.median(r[2] for r in results):.1f} us/msg over the "
          f"delivery window (min {min(r[2] for r in results):.1f}), "
          f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    print(machine())
    for precision in PRECISIONS:
        results = []
        for run_no in range(RUNS):
            with broker_process(timerPrecisionMs=str(precision),
                                mappedFileSizeCommitLog=str(256 * 1024 * 1024)) as addr:
                results.append(run(one_run(addr, run_no)))
        report(precision, results)


if __name__ == "__main__":
    main()
