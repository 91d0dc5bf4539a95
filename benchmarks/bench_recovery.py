"""Broker restart time after kill -9 and after a clean stop, on stores of 1, 4 and 16 GiB.

For each size: a store of 1 KiB messages (4 queues, a UNIQ_KEY each, so the index is
built too) is written offline in 1 GiB segments (the production default) and closed.
Then, `--rounds` times each:
  * crash: an `mqbroker` process on the store takes `--tail` acknowledged 1 KiB sends
    (64 in flight), is killed with SIGKILL right after the last answer, and is started
    again; measured: time from spawning the process to its first answer
    (GET_BROKER_RUNTIME_INFO) and the broker's CPU time by then (interpreter start-up
    included), and from the broker log the recovery's own wall and CPU time and how much
    it verified (what was written after the last checkpoint);
  * clean: the broker is stopped with SIGTERM and started again, measured the same way.
Size 0 is a store holding only those sends: the interpreter and broker start-up alone.

Usage: python -m benchmarks.bench_recovery [--sizes 1,4,16] [--rounds 3] [--tail 20000]
       [--dir DIR] [--keep] [--engine DIR]
`--engine DIR` runs the broker from another checkout (for before/after figures);
`--dir` puts the stores there (they need the disk space: the sizes summed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.processes import free_port
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import SendMessageRequestHeader, send_header_v2
from engine.protocol.message import BatchItem, BatchMessage, encode_batch_body
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.store import MessageStore, MessageStoreConfig

GIB = 1 << 30
BODY = b"x" * 1024
TOPIC = "BenchTopic"
QUEUES = 4
REPORT = re.compile(r"recovered in ([0-9.]+) s(?: \(([0-9.]+) s CPU\))?: RecoveryReport\("
                    r"abnormal=(\w+), scan_from=(\d+), process_offset=(\d+), "
                    r"truncated_bytes=\d+, redispatched=(\d+)")


def build(root: Path, size: int) -> tuple[float, int]:
    """Write `size` bytes of 1 KiB messages; returns (seconds, messages)."""
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(root)))
    store.load()
    start = time.perf_counter()
    n = 0
    while store.get_max_phy_offset() < size:
        items = [BatchItem(0, BODY, f"UNIQ_KEY\x01{n + i:032X}") for i in range(32)]
        batch = BatchMessage(TOPIC, encode_batch_body(items), queue_id=(n // 32) % QUEUES,
                             born_host=("10.0.0.2", 50000))
        r = store.append_messages(batch)
        assert r.ok, r
        n += 32
    store.close()
    return time.perf_counter() - start, n


class Broker:
    """An mqbroker process on a store directory."""

    def __init__(self, root: Path, work: Path, engine: str) -> None:
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.logs = work / "logs"
        conf = work / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in {
            "brokerName": "bench-recovery", "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1", "listenPort": str(self.port),
            "storePathRootDir": str(root), "logsDir": str(self.logs),
            "flushDiskType": "ASYNC_FLUSH"}.items()))
        log = self.logs / "broker.log"
        self.log_from = log.stat().st_size if log.exists() else 0  # this run's lines only
        env = {**os.environ, "HOME": str(work), "NAMESRV_ADDR": "", "PYTHONPATH": engine}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.broker.main", "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=engine)
        self.spawned = time.perf_counter()

    async def first_answer(self, client: RemotingClient) -> tuple[float, float]:
        """Seconds from spawning to the first answer, and the broker's CPU seconds by then
        (interpreter start-up included)."""
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"broker exited with {self.proc.returncode}; see {self.logs}")
            with contextlib.suppress(Exception):
                resp = await client.invoke(
                    self.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=2)
                if resp.code == ResponseCode.SUCCESS:
                    return time.perf_counter() - self.spawned, self.cpu_seconds()
                client.close_connection(self.addr)
            await asyncio.sleep(0.01)

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process (Linux /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def last_report(self) -> tuple[float, float, int, int] | None:
        """(recovery seconds, its CPU seconds (-1 if not logged), bytes verified, records
        re-dispatched) from the newest report in the broker log."""
        found = None
        with contextlib.suppress(OSError), open(self.logs / "broker.log", "rb") as f:
            f.seek(self.log_from)
            for line in f.read().decode(errors="replace").splitlines():
                if m := REPORT.search(line):
                    cpu = float(m[2]) if m[2] else -1.0
                    found = (float(m[1]), cpu, int(m[5]) - int(m[4]), int(m[6]))
        return found

    def stop(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(120)


async def send_tail(client: RemotingClient, addr: str, n: int) -> None:
    header = SendMessageRequestHeader(
        producer_group="BenchPG", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=0, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties="UNIQ_KEY\x01AC110001000078308DB1A1B2C3D4E5F6\x02WAIT\x01true")
    todo = iter(range(n))

    async def worker() -> None:
        for i in todo:
            h = send_header_v2(header)
            ext = to_ext(h)
            ext["e"] = str(i % QUEUES)  # queueId
            cmd: RemotingCommand = request(RequestCode.SEND_MESSAGE_V2, ext, BODY)
            resp = await client.invoke(addr, cmd, timeout=30)
            if resp.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send failed: {resp.code} {resp.remark}")

    await asyncio.gather(*(worker() for _ in range(64)))


async def measure(root: Path, work: Path, engine: str, rounds: int, tail: int) -> None:
    client = RemotingClient()
    crash: list[tuple[float, float]] = []
    clean: list[tuple[float, float]] = []
    recovery: dict[str, list[tuple[float, float]]] = {"kill -9": [], "clean": []}
    try:
        broker = Broker(root, work, engine)
        await broker.first_answer(client)
        for _ in range(rounds):
            await send_tail(client, broker.addr, tail)
            broker.stop(signal.SIGKILL)
            client.close_connection(broker.addr)
            broker = Broker(root, work, engine)
            crash.append(await broker.first_answer(client))
            rep = broker.last_report()
            if rep:
                recovery["kill -9"].append(rep[:2])
            print(f"  kill -9 -> first answer {crash[-1][0]:.3f} s ({crash[-1][1]:.2f} s CPU); "
                  "recovery: " + (
                f"{rep[0]:.3f} s ({rep[1]:.3f} s CPU), verified {rep[2] / 2**20:.1f} MiB, "
                f"{rep[3]} records re-dispatched" if rep else "no report"), flush=True)
        for _ in range(rounds):
            broker.stop(signal.SIGTERM)
            client.close_connection(broker.addr)
            broker = Broker(root, work, engine)
            clean.append(await broker.first_answer(client))
            rep = broker.last_report()
            if rep:
                recovery["clean"].append(rep[:2])
            print(f"  clean stop -> first answer {clean[-1][0]:.3f} s ({clean[-1][1]:.2f} s CPU)"
                  + (f"; recovery {rep[0]:.3f} s ({rep[1]:.3f} s CPU)" if rep else ""),
                  flush=True)
        broker.stop(signal.SIGTERM)
    finally:
        await client.close()
    for label, xs in (("kill -9", crash), ("clean", clean)):
        recs = recovery[label]
        rec = (f"; recovery itself median {statistics.median(r[0] for r in recs):.3f} s, "
               f"{statistics.median(r[1] for r in recs):.3f} s CPU") if recs else ""
        wall = [x[0] for x in xs]
        print(f"  {label}: first answer median {statistics.median(wall):.3f} s "
              f"(min {min(wall):.3f}, max {max(wall):.3f}, {len(xs)} runs), broker CPU "
              f"median {statistics.median(x[1] for x in xs):.2f} s{rec}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="store sizes in GiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tail", type=int, default=20_000, help="sends before each kill -9")
    ap.add_argument("--dir", default=None, help="where to build the stores")
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the stores")
    ap.add_argument("--engine", default=os.getcwd(), help="checkout the broker runs from")
    args = ap.parse_args()
    print(machine())
    print(f"load average {os.getloadavg()[0]:.2f}; broker from {args.engine}")
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-recovery-"))
    for gib in (int(x) for x in args.sizes.split(",")):
        root = base / f"store-{gib}g"
        work = base / f"work-{gib}g"
        work.mkdir(parents=True, exist_ok=True)
        if not (root / "checkpoint").exists():
            secs, n = build(root, gib * GIB)
            print(f"{gib} GiB store: {n:,} messages written in {secs:.1f} s", flush=True)
        else:
            print(f"{gib} GiB store: reused", flush=True)
        asyncio.run(measure(root, work, args.engine, args.rounds, args.tail))
        if not args.keep:
            shutil.rmtree(root)
            shutil.rmtree(work)
    if not args.keep and not args.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
