"""Route queries per second against a name server process, one connection, 16 in flight.

Starts `mqnamesrv` as a separate process (so client and server each get a core), registers a
master and a slave of one broker serving the benchmark topic, then keeps 16
GET_ROUTEINFO_BY_TOPIC requests in flight over a single connection for several timed runs.
Target (issue): at least 40,000 route queries per second.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.machine import machine, percentile, summary
from benchmarks.processes import free_port, wait_listening
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.namesrv import RegisterBrokerRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

IN_FLIGHT = 16
RUNS = 7
RUN_SECONDS = 2.0
TOPIC = "BenchTopic"


async def register(client: RemotingClient, addr: str) -> None:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {TOPIC: TopicConfig(TOPIC, 8, 8)}, DataVersion(int(time.time() * 1000), 1))).encode()
    for broker_id in (0, 1):
        header = RegisterBrokerRequestHeader(
            broker_name="broker-a", broker_addr=f"127.0.0.1:{10911 + 100 * broker_id}",
            cluster_name="DefaultCluster", ha_server_addr=f"127.0.0.1:{10912 + 100 * broker_id}",
            broker_id=broker_id)
        resp = await client.invoke(addr, request(RequestCode.REGISTER_BROKER, to_ext(header), body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def one_run(client: RemotingClient, addr: str) -> tuple[float, list[float]]:
    query = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    stop_at = time.perf_counter() + RUN_SECONDS
    latencies: list[float] = []

    async def worker() -> int:
        done = 0
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            resp = await client.invoke(addr, query)
            latencies.append(time.perf_counter() - t0)
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                raise SystemExit(f"route query failed: {resp.code} {resp.remark}")
            done += 1
        return done

    start = time.perf_counter()
    counts = await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return sum(counts) / (time.perf_counter() - start), latencies


async def bench(addr: str) -> None:
    client = RemotingClient()
    try:
        await register(client, addr)
        await one_run(client, addr)  # warm-up
        rates, lat = [], []
        for _ in range(RUNS):
            rate, latencies = await one_run(client, addr)
            rates.append(rate)
            lat.extend(latencies)
        print(summary(f"GET_ROUTEINFO_BY_TOPIC, {IN_FLIGHT} in flight, one connection",
                      rates, "queries/s", 40_000))
        print(f"  latency p50 {percentile(lat, 50) * 1e3:.2f} ms, "
              f"p99 {percentile(lat, 99) * 1e3:.2f} ms")
    finally:
        await client.close()


def main() -> None:
    print(machine())
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp, "namesrv.properties")
        conf.write_text(f"listenPort={port}\nkvConfigPath={tmp}/kvConfig.json\n"
                        f"logsDir={tmp}/logs\nbindAddress=127.0.0.1\n")
        proc = subprocess.Popen([sys.executable, "-m", "engine.namesrv.main", "-c", str(conf)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HOME": tmp})
        try:
            async def go() -> None:
                await wait_listening(port, proc)
                await bench(f"127.0.0.1:{port}")
            run(go())
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
