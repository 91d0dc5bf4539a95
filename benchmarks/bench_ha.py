"""Replication: lag under a producer at full speed, and SYNC_MASTER vs ASYNC_MASTER latency.

Runs a master and a slave `mqbroker` process (the slave pointed at the master's HA port with
haMasterAddress, no name server) and a client in this process, then measures:
  * replication lag while 1 KiB sends run at full speed (64 in flight) against an
    ASYNC_MASTER: bytes and estimated seconds behind, sampled every 50 ms from
    GET_BROKER_HA_STATUS, and how long the slave takes to catch up once sends stop;
  * send latency percentiles, 1 and 16 in flight, ASYNC_MASTER vs SYNC_MASTER (each with a
    connected slave).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator

from benchmarks.bench_broker import send_cmd
from benchmarks.machine import machine, percentile
from benchmarks.processes import broker_process
from engine.ha.status import HARuntimeInfo
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

QUEUES = 4
LAG_SECONDS = 8.0


@contextlib.contextmanager
def master_and_slave(role: str) -> Iterator[str]:
    """Yields the master's address while a master and its slave run."""
    with broker_process(brokerRole=role, brokerName="ha-bench") as master:
        ha = f"127.0.0.1:{int(master.rsplit(':', 1)[1]) + 1}"
        with broker_process(brokerRole="SLAVE", brokerId="1", brokerName="ha-bench",
                            haMasterAddress=ha, haReconnectInterval="100"):
            yield master


async def status(client: RemotingClient, addr: str) -> HARuntimeInfo:
    resp = await client.invoke(addr, request(RequestCode.GET_BROKER_HA_STATUS), timeout=10)
    return HARuntimeInfo.decode(resp.body or b"{}")


async def wait_slave(client: RemotingClient, addr: str) -> None:
    deadline = time.monotonic() + 30
    while not (await status(client, addr)).ha_connection_info:
        if time.monotonic() > deadline:
            raise SystemExit("the slave did not connect within 30 s")
        await asyncio.sleep(0.05)


async def flood(client: RemotingClient, addr: str, stop: asyncio.Event, in_flight: int) -> int:
    sent = 0

    async def worker(n: int) -> None:
        nonlocal sent
        i = n
        while not stop.is_set():
            resp = await client.invoke(addr, send_cmd(i % QUEUES), timeout=30)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send failed: {resp.code} {resp.remark}")
            sent += 1
            i += in_flight

    await asyncio.gather(*(worker(n) for n in range(in_flight)))
    return sent


async def bench_lag(addr: str) -> None:
    client = RemotingClient()
    try:
        await wait_slave(client, addr)
        stop = asyncio.Event()
        producer = asyncio.create_task(flood(client, addr, stop, 64))
        diffs: list[int] = []
        seconds: list[float] = []
        started = time.perf_counter()
        while time.perf_counter() - started < LAG_SECONDS:
            await asyncio.sleep(0.05)
            conns = (await status(client, addr)).ha_connection_info
            if conns:
                diffs.append(conns[0].diff)
                seconds.append(conns[0].estimated_seconds_behind)
        stop.set()
        sent = await producer
        elapsed = time.perf_counter() - started
        stopped = time.perf_counter()
        while True:
            info = await status(client, addr)
            if info.ha_connection_info and info.ha_connection_info[0].diff == 0:
                break
            await asyncio.sleep(0.005)
        catch_up = time.perf_counter() - stopped
        print(f"ASYNC_MASTER at full speed (1 KiB, 64 in flight): {sent / elapsed:,.0f} msgs/s, "
              f"{info.master_commit_log_max_offset / 2**20:,.0f} MiB replicated")
        print(f"  lag bytes: median {statistics.median(diffs) / 1024:,.0f} KiB, "
              f"p99 {percentile(diffs, 99) / 1024:,.0f} KiB, max {max(diffs) / 1024:,.0f} KiB "
              f"({len(diffs)} samples)")
        print(f"  lag seconds: median {statistics.median(seconds) * 1e3:.0f} ms, "
              f"p99 {percentile(seconds, 99) * 1e3:.0f} ms, max {max(seconds) * 1e3:.0f} ms")
        print(f"  slave caught up {catch_up * 1e3:.0f} ms after the sends stopped")
    finally:
        await client.close()


async def latencies(addr: str, in_flight: int, count: int) -> list[float]:
    client = RemotingClient()
    out: list[float] = []
    try:
        await wait_slave(client, addr)
        for i in range(500):  # warm-up (creates the topic)
            await client.invoke(addr, send_cmd(i % QUEUES), timeout=30)
        it = iter(range(count))

        async def worker() -> None:
            for i in it:
                t0 = time.perf_counter()
                resp = await client.invoke(addr, send_cmd(i % QUEUES), timeout=30)
                out.append(time.perf_counter() - t0)
                if resp.code != ResponseCode.SUCCESS:
                    raise SystemExit(f"send failed: {resp.code} {resp.remark}")

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    finally:
        await client.close()
    return out


def bench_latency() -> None:
    for in_flight, count in ((1, 3000), (16, 20_000)):
        for role in ("ASYNC_MASTER", "SYNC_MASTER"):
            with master_and_slave(role) as addr:
                t0 = time.perf_counter()
                lat = run(latencies(addr, in_flight, count))
                rate = count / (time.perf_counter() - t0)
            print(f"{role:>12}, {in_flight:>2} in flight: p50 {percentile(lat, 50) * 1e3:.2f} ms, "
                  f"p90 {percentile(lat, 90) * 1e3:.2f} ms, p99 {percentile(lat, 99) * 1e3:.2f} ms,"
                  f" max {max(lat) * 1e3:.1f} ms (~{rate:,.0f} sends/s incl. warm-up)")


def main() -> None:
    print(machine())
    with master_and_slave("ASYNC_MASTER") as addr:
        run(bench_lag(addr))
    bench_latency()


if __name__ == "__main__":
    main()
