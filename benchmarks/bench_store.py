"""Message store throughput: appends (1 KiB, batches, 64 KiB vs dd), SYNC_FLUSH group commit, reads.

Run: `.venv/bin/python -m benchmarks.bench_store [--quick]`; set BENCH_DIR to choose the disk
(default: the system temp dir) and WARM=0 to run without segment warming (warmMapedFileEnable,
on by default here).  Each figure is the median of several runs on a fresh store with
RocketMQ's default segment sizes; appends include dispatch (consume queue + index).
Targets (issue): 1 KiB ASYNC_FLUSH one writer >= 100,000 msgs/s, in batches of 32 >= 200,000
msgs/s; 64 KiB appends >= 50% of dd's buffered write bandwidth; SYNC_FLUSH with 64 writers
>= 10x one writer; reads of 1 KiB through the consume queue >= 150,000 msgs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from benchmarks.machine import machine, percentile, summary
from engine.protocol.message import (
    BatchItem,
    BatchMessage,
    BrokerMessage,
    encode_batch_body,
    properties_to_string,
)
from engine.store import FlushDiskType, MessageStore, MessageStoreConfig

TOPIC = "BenchmarkTest"


def _messages(n: int, size: int, queues: int = 4) -> list[BrokerMessage]:
    body = os.urandom(size)
    return [
        BrokerMessage(
            TOPIC, body, queue_id=i % queues,
            properties=properties_to_string({
                "UNIQ_KEY": f"7F0000010F2C18B4AAC2{i:012X}", "WAIT": "true", "TAGS": "TagA",
            }),
            born_timestamp=1_700_000_000_000, born_host=("10.0.0.2", 50000),
        )
        for i in range(n)
    ]


class _Store:
    """A fresh store in a temporary directory, removed afterwards."""

    def __init__(self, base: str, **kw: object) -> None:
        self.root = tempfile.mkdtemp(prefix="bench-store-", dir=base)
        cfg = MessageStoreConfig(store_path_root_dir=self.root,
                                 warm_mapped_file_enable=os.environ.get("WARM", "1") == "1")
        cfg.update({k: str(v) for k, v in kw.items()})
        self.store = MessageStore(cfg)

    async def __aenter__(self) -> MessageStore:
        os.sync()  # start every run without a backlog of dirty pages from the previous one
        self.store.load()
        await self.store.start()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


def dd_bandwidth(base: str, mib: int) -> float:
    """Buffered sequential write MB/s measured by dd (no fsync), as dd reports it."""
    path = os.path.join(base, "bench-dd.bin")
    os.sync()
    try:
        out = subprocess.run(
            ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}"],
            capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip
    finally:
        if os.path.exists(path):
            os.unlink(path)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", out.stderr)
    if m is None:
        raise RuntimeError(f"cannot parse dd output: {out.stderr!r}")
    return int(m.group(1)) / float(m.group(2)) / 1e6


async def append_single(base: str, msgs: list[BrokerMessage], n: int) -> tuple[float, list[float]]:
    lat: list[float] = []
    async with _Store(base) as store:
        put = store.put_message
        clock = time.perf_counter_ns
        pool = len(msgs)
        start = time.perf_counter()
        for i in range(n):
            t = clock()
            await put(msgs[i % pool])
            if i % 16 == 0:
                lat.append((clock() - t) / 1000)
        rate = n / (time.perf_counter() - start)
    return rate, lat


async def append_batches(base: str, bodies: list[bytes], n_batches: int, per: int) -> float:
    async with _Store(base) as store:
        batches = [
            BatchMessage(TOPIC, body, queue_id=i % 4, born_host=("10.0.0.2", 50000))
            for i, body in enumerate(bodies)
        ]
        start = time.perf_counter()
        for i in range(n_batches):
            r = await store.put_messages(batches[i % len(batches)])
            assert r.ok, r
        return n_batches * per / (time.perf_counter() - start)


async def append_bandwidth(base: str, msgs: list[BrokerMessage], n: int) -> float:
    async with _Store(base) as store:
        start = time.perf_counter()
        total = 0
        for i in range(n):
            r = await store.put_message(msgs[i % len(msgs)])
            total += r.wrote_bytes
        return total / (time.perf_counter() - start) / 1e6


async def sync_flush(
    base: str, msgs: list[BrokerMessage], writers: int, n: int
) -> tuple[float, list[float]]:
    lat: list[float] = []
    async with _Store(base, flushDiskType=FlushDiskType.SYNC_FLUSH.value) as store:
        per = n // writers

        async def writer(w: int) -> None:
            for i in range(per):
                t = time.perf_counter_ns()
                r = await store.put_message(msgs[(w * per + i) % len(msgs)])
                lat.append((time.perf_counter_ns() - t) / 1000)
                assert r.ok, r

        start = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        return per * writers / (time.perf_counter() - start), lat


async def read_through_cq(base: str, msgs: list[BrokerMessage], n: int) -> float:
    async with _Store(base) as store:
        for i in range(n):
            store.append_message(msgs[i % len(msgs)])
        rates = []
        for _ in range(3):
            got = 0
            start = time.perf_counter()
            for q in range(4):
                offset = 0
                while True:
                    r = store.get_message("bench", TOPIC, q, offset, 32)
                    if not r.messages:
                        break
                    got += len(r.messages)
                    offset = r.next_begin_offset
            rates.append(got / (time.perf_counter() - start))
            assert got == n, got
        return statistics.median(rates)


def _lat(label: str, lat: list[float]) -> str:
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    return f"  {label} latency: p50 {p50:,.1f} us, p99 {p99:,.1f} us"


def _runs(fn: Callable[[], float], runs: int) -> list[float]:
    return [fn() for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer and smaller runs")
    args = parser.parse_args()
    base = os.environ.get("BENCH_DIR") or tempfile.gettempdir()
    runs = 2 if args.quick else 3
    n1k = 50_000 if args.quick else 200_000
    print(f"machine: {machine()} | load average {os.getloadavg()[0]:.2f} at start")
    print(f"data dir: {base}  (segments: commit log 1 GiB, consume queue 300,000 entries)")

    msgs_1k = _messages(1024, 1024)
    results = [asyncio.run(append_single(base, msgs_1k, n1k)) for _ in range(runs)]
    print(summary("append 1 KiB, ASYNC_FLUSH, 1 writer, dispatch included",
                  [r for r, _ in results], "msgs/s", 100_000))  # fmt: skip
    print(_lat("put", [x for _, lat in results for x in lat]))

    bodies = [
        encode_batch_body(
            BatchItem(0, m.body, m.properties) for m in msgs_1k[i * 32 : (i + 1) * 32]
        )
        for i in range(32)
    ]
    rates = _runs(lambda: asyncio.run(append_batches(base, bodies, n1k // 32, 32)), runs)
    print(summary("append 1 KiB in batches of 32, ASYNC_FLUSH", rates, "msgs/s", 200_000))

    mib = 512 if args.quick else 1024
    dd = statistics.median(dd_bandwidth(base, mib) for _ in range(runs))
    msgs_64k = _messages(64, 64 * 1024)
    n64 = mib * 16
    rates = _runs(lambda: asyncio.run(append_bandwidth(base, msgs_64k, n64)), runs)
    print(f"dd if=/dev/zero bs=1M count={mib} (buffered): median {dd:,.0f} MB/s")
    print(summary("append 64 KiB, ASYNC_FLUSH", rates, "MB/s", dd / 2))
    print(f"  = {statistics.median(rates) / dd:.0%} of dd")

    n_sync = 2_000 if args.quick else 4_000
    one = [asyncio.run(sync_flush(base, msgs_1k, 1, n_sync)) for _ in range(runs)]
    many = [asyncio.run(sync_flush(base, msgs_1k, 64, n_sync * 8)) for _ in range(runs)]
    one_rate = statistics.median(r for r, _ in one)
    print(summary("SYNC_FLUSH 1 KiB, 1 writer", [r for r, _ in one], "msgs/s"))
    print(_lat("put", [x for _, lat in one for x in lat]))
    print(summary("SYNC_FLUSH 1 KiB, 64 writers", [r for r, _ in many], "msgs/s", 10 * one_rate))
    print(_lat("put", [x for _, lat in many for x in lat]))
    print(f"  = {statistics.median(r for r, _ in many) / one_rate:.1f}x one writer")

    rates = _runs(lambda: asyncio.run(read_through_cq(base, msgs_1k, n1k)), runs)
    print(summary("read 1 KiB through the consume queue (32 per pull)", rates, "msgs/s", 150_000))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
