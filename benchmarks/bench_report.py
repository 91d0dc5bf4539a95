"""The Spark lag report end to end on a realistic synthetic history, 1M and 10M samples.

The history: 300 consumer groups, each one topic of 4 queues on 2 brokers, sampled over the
report's day and the day before (the trend's baseline), with diurnal traffic (a peak in the
afternoon, UTC), most consumers faster than the peak and one in ten only a little faster
than the average rate (their lag builds at the peak and drains at night), one group with a
queue stuck for two hours (STALL, retention risk), one group whose offsets are reset
backwards (REWIND), and five minutes in which broker-b could not be sampled (gaps). 1M
samples = 864 cycles a day (every 100 s), 10M = 8,640 (every 10 s), both x 1,200 queues, per
day.

Each run starts a fresh process (`python -m mqadmin.reports.submit`, local[2]): Spark's
start is included. Prints the wall time of each run, the median and percentiles, where the
time went (the job's phases), and the machine. Target (issue 14): 10M in under 60 s.

    python -m benchmarks.bench_report [--sizes 1,10] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.machine import machine, percentile
from mqadmin.reports.schema import arrow_schema

GROUPS = 300
QUEUES = 4
DAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
STALLED, REWOUND = 17, 42  # group indexes
FILE_CYCLES = 720


def _dictionary(names: list[str], idx: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)),
                                          pa.array(names)).cast(pa.string())


def generate(root: Path, cycles_per_day: int, seed: int = 1) -> int:
    """Write two days of history under `root`; returns the samples of the report's day."""
    rnd = np.random.default_rng(seed)
    interval_s = 86_400 // cycles_per_day
    n = 2 * cycles_per_day
    t = (np.arange(n) * interval_s).astype(np.int64)  # seconds since the day before
    hour = (t % 86_400) / 3600
    base = rnd.uniform(5, 200, GROUPS)  # messages/s per group, on average
    diurnal = 1 + 0.8 * np.sin(2 * np.pi * (hour - 9) / 24)  # peak at 15:00 UTC
    produce = base[None, :] * diurnal[:, None] * rnd.uniform(0.9, 1.1, (n, GROUPS))
    # Most consumers keep up with the afternoon peak (1.8x the average); one in ten does not.
    capacity = base * np.where(rnd.random(GROUPS) < 0.1, rnd.uniform(1.05, 1.6, GROUPS),
                               rnd.uniform(1.9, 2.6, GROUPS))
    increments = (produce - capacity[None, :]) * interval_s
    walk = np.cumsum(increments, axis=0)
    lag_g = walk - np.minimum(np.minimum.accumulate(walk, axis=0), 0)  # Lindley: lag >= 0
    produced_g = np.cumsum(produce * interval_s, axis=0)
    weights = np.array([0.4, 0.3, 0.2, 0.1])
    produced = (produced_g[:, :, None] * weights).astype(np.int64)  # (n, G, Q)
    lag = (lag_g[:, :, None] * weights).astype(np.int64)
    consumed = produced - lag
    # STALL: group 17's queue 0 stops at 14:00 for two hours, its other queues go on.
    stall = (t >= 86_400 + 14 * 3600) & (t < 86_400 + 16 * 3600)
    first = np.argmax(stall)
    consumed[stall, STALLED, 0] = consumed[first, STALLED, 0]
    # REWIND: group 42 is reset 50,000 messages back at 09:00 and catches up over an hour.
    rewind = (t >= 86_400 + 9 * 3600) & (t < 86_400 + 10 * 3600)
    back = np.linspace(50_000, 0, rewind.sum()).astype(np.int64)
    consumed[rewind, REWOUND, :] -= back[:, None] // QUEUES
    consumed = np.maximum(consumed, 0)
    lag = produced - consumed
    rate = np.maximum(produce[:, :, None] * weights, 0.1)
    lag_ms = (lag / rate * 1000).astype(np.int64)
    risk = np.zeros_like(lag, dtype=bool)
    risk[stall, STALLED, 0] = lag[stall, STALLED, 0] > 100_000
    gap = (t >= 86_400 + 3 * 3600) & (t < 86_400 + 3 * 3600 + 300)  # broker-b unreachable
    groups = [f"group-{g:03d}" for g in range(GROUPS)]
    groups[STALLED], groups[REWOUND] = "orders-stalled", "billing-rewound"
    topics = [f"topic-{g:03d}" for g in range(GROUPS)]
    schema = arrow_schema()
    start_ms = int((DAY - dt.timedelta(days=1)).timestamp() * 1000)
    for lo in range(0, n, FILE_CYCLES):
        hi = min(n, lo + FILE_CYCLES)
        c = hi - lo
        cyc = np.repeat(np.arange(lo, hi), GROUPS * QUEUES)
        g_idx = np.tile(np.repeat(np.arange(GROUPS), QUEUES), c)
        q_idx = np.tile(np.arange(QUEUES), c * GROUPS)
        broker_idx = q_idx % 2
        keep = ~(gap[cyc] & (broker_idx == 1))
        sl = (slice(lo, hi),)
        cols = {
            "ts": pa.array(start_ms + t[cyc] * 1000, pa.timestamp("ms", tz="UTC")),
            "cluster": _dictionary(["prod"], np.zeros(len(cyc), np.int32)),
            "group": _dictionary(groups, g_idx), "topic": _dictionary(topics, g_idx),
            "broker": _dictionary(["broker-a", "broker-b"], broker_idx),
            "queue_id": pa.array(q_idx.astype(np.int32)),
            "broker_offset": pa.array(produced[sl].reshape(-1)),
            "consumer_offset": pa.array(consumed[sl].reshape(-1)),
            "lag": pa.array(lag[sl].reshape(-1)), "lag_ms": pa.array(lag_ms[sl].reshape(-1)),
            "produce_rate": pa.array(rate[sl].reshape(-1)),
            "consume_rate": pa.array(rate[sl].reshape(-1)),
            "interval_ms": pa.array(np.full(len(cyc), interval_s * 1000, np.int32)),
            "ok": pa.array(np.ones(len(cyc), bool)),
            "retention_risk": pa.array(risk[sl].reshape(-1)),
            "risk_messages": pa.array(np.where(risk[sl], lag[sl], 0).reshape(-1)),
        }
        table = pa.table(cols, schema=schema)
        day_of_row = t[cyc] // 86_400
        for d in np.unique(day_of_row):
            _write(root, int(d), lo, table.filter(pa.array(keep & (day_of_row == d))))
        gap_cycles = [i for i in range(lo, hi) if gap[i]]
        if gap_cycles:
            rows = [{"ts": start_ms + int(t[i]) * 1000, "cluster": "prod", "group": g,
                     "topic": "", "broker": "broker-b", "queue_id": -1,
                     "interval_ms": interval_s * 1000, "ok": False, "retention_risk": False,
                     "risk_messages": 0} for i in gap_cycles for g in groups]
            _write(root, 1, lo, pa.Table.from_pylist(rows, schema=schema), "gaps")
    return cycles_per_day * GROUPS * QUEUES


def _write(root: Path, day: int, seq: int, table: pa.Table, kind: str = "bench") -> None:
    name = (DAY - dt.timedelta(days=1) + dt.timedelta(days=day)).date().isoformat()
    folder = root / f"date={name}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"part-{kind}-{seq:06d}.parquet", row_group_size=1_000_000)


PHASE = re.compile(r"\[\s*([\d.]+) s\] (.*)")


def _tree_cpu(pid: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds (user + system) of `pid` and its descendants into `seen`."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
    except (OSError, IndexError, ValueError):
        return
    for child in children:
        _tree_cpu(child, seen)


def run_report(root: Path, out: Path) -> tuple[float, float, list[tuple[float, str]]]:
    """One report in a fresh process: wall time, CPU seconds of the process tree (Python
    and the JVM, sampled every 0.2 s) and the job's phase marks."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [sys.executable, "-m", "mqadmin.reports.submit", "--input", str(root), "--out",
           str(out), "--date", DAY.date().isoformat(), "--master", "local[2]"]
    started = time.perf_counter()
    seen: dict[int, float] = {}
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []))
        reader.start()
        while proc.poll() is None:
            _tree_cpu(proc.pid, seen)
            time.sleep(0.2)
        reader.join()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"report failed:\n{''.join(lines)[-3000:]}")
    marks = [(float(m.group(1)), m.group(2)) for m in map(PHASE.match, lines) if m]
    return wall, sum(seen.values()), marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10", help="millions of samples, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the history and reports here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"load average before: {os.getloadavg()}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            cycles = {1: 864, 10: 8640}.get(size, size * 864)
            root = work / f"history-{size}M" / "lag-history"
            began = time.perf_counter()
            samples = cycles * GROUPS * QUEUES
            if not root.exists():
                generate(root, cycles)
            print(f"\n{samples:,} samples in the day ({2 * samples:,} on disk with the day "
                  f"before), generated in {time.perf_counter() - began:.1f} s")
            walls: list[float] = []
            cpus: list[float] = []
            for i in range(args.runs):
                wall, cpu, marks = run_report(root, work / f"report-{size}M-{i}")
                walls.append(wall)
                cpus.append(cpu)
                steps = "; ".join(f"{b - a:.1f} s {name[:40]}" for (a, name), (b, _) in
                                  itertools.pairwise(marks))
                print(f"  run {i + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU ({steps})")
            print(f"  {size}M: median {statistics.median(walls):.1f} s, p90 "
                  f"{percentile(walls, 90):.1f} s, min {min(walls):.1f} s, "
                  f"{samples / statistics.median(walls):,.0f} samples/s; CPU median "
                  f"{statistics.median(cpus):.1f} s (2 cores: >= {statistics.median(cpus) / 2:.1f} "
                  "s wall on an idle machine); target 10M < 60 s")
        print(f"load average after: {os.getloadavg()}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
