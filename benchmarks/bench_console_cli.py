"""`mqadmin consumerProgress` (every group), `topicList` and `dlq list` on a big cluster.

Each command runs as an operator runs it: a fresh ``mqadmin`` process, ``-o json``, its
output parsed and checked (every group, topic and dead-letter group of the cluster is in
it).  Measured per command: wall time from spawning to exit, and the CPU seconds the
command's process used (user + system, from the children's rusage) — on a shared machine
the CPU time says more than the wall time, and both are printed with the load average.

Against this engine (default): the cluster of `benchmarks.big_cluster` (10,000 topics of 8
queues on two broker sets, 3,000 groups; BENCH_* in the environment change it) is started
and filled.  Against any other cluster, e.g. Apache's brokers filled by this module with
``--fill``: ``python -m benchmarks.bench_console_cli -n HOST:PORT [--fill]``; ``--big`` for
one that ``python -m benchmarks.big_cluster`` filled and keeps.

    python -m benchmarks.bench_console_cli                  # ROUNDS runs of each command
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import big_cluster as big
from benchmarks.machine import machine, percentile

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))

#: Broker sets of the cluster measured (each group is one message behind on each).
BROKERS = [len(big.BROKER_SETS)]
Check = Callable[[Any], str | None]  # the parsed output -> what is wrong with it, or None


def _groups_ok(rows: Any) -> str | None:
    names = {r["group"] for r in rows}
    missing = [g for g in (big.group_name(i) for i in range(big.GROUPS)) if g not in names]
    online = sum(1 for r in rows if r["group"].startswith("big-group-") and r["count"] > 0)
    wrong = [r["group"] for r in rows if r["group"].startswith("big-group-")
             and r["diffTotal"] != BROKERS[0]]  # one message behind on each broker set
    if missing:
        return f"{len(missing)} groups missing, e.g. {missing[0]}"
    if wrong:
        return f"{len(wrong)} groups with a wrong diffTotal, e.g. {wrong[0]}"
    if online != big.ONLINE:
        return f"{online} groups online, expected {big.ONLINE}"
    return None


def _topics_ok(rows: Any) -> str | None:
    found = sum(1 for r in rows if r["topic"].startswith("BigTopic"))
    return None if found == big.TOPICS else f"{found} topics listed, expected {big.TOPICS}"


def _dlq_ok(rows: Any) -> str | None:
    found = sum(1 for r in rows if r["group"].startswith("big-group-"))
    return None if found == big.DLQ_GROUPS else f"{found} DLQ groups, expected {big.DLQ_GROUPS}"


COMMANDS: tuple[tuple[str, tuple[str, ...], Check, float], ...] = (
    ("consumerProgress (all groups)", ("consumerProgress",), _groups_ok, 5.0),
    ("topicList", ("topicList",), _topics_ok, 1.0),
    ("dlq list", ("dlq", "list"), _dlq_ok, 5.0),
)


def run_once(args: tuple[str, ...], namesrv: str, home: str) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds, parsed output) of one ``mqadmin`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mqadmin.app", *args, "-n", namesrv,
                           "-o", "json"], capture_output=True, text=True,
                          env={**os.environ, "HOME": home}, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"mqadmin {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        return wall, cpu, json.loads(done.stdout)
    except json.JSONDecodeError:  # counted and reported by `measure`, never hidden
        return wall, cpu, Truncated(len(done.stdout))


class Truncated(int):
    """The length of an output that ended early (exit code 0, JSON cut short)."""


def measure(namesrv: str, checked: bool) -> None:
    with tempfile.TemporaryDirectory() as home:
        for label, args, check, target in COMMANDS:
            walls: list[float] = []
            cpus: list[float] = []
            loads: list[float] = []
            cut: list[int] = []
            while len(walls) < ROUNDS:
                wall, cpu, rows = run_once(args, namesrv, home)
                if isinstance(rows, Truncated):
                    cut.append(rows)
                    if len(cut) > 3 * ROUNDS:
                        raise SystemExit(f"{label}: output cut short {len(cut)} times")
                    continue
                walls.append(wall)
                cpus.append(cpu)
                loads.append(os.getloadavg()[0])
                wrong = check(rows) if checked else None
                if wrong:
                    raise SystemExit(f"{label}: {wrong}")
            if cut:
                print(f"  {label}: {len(cut)} more run(s) exited 0 with their JSON output cut "
                      f"short (at {', '.join(map(str, cut))} characters), not counted above",
                      flush=True)
            median = statistics.median(walls)
            print(f"{label:<32} wall median {median:6.2f} s  p90 "
                  f"{percentile(walls, 90):6.2f} s  | CPU median {statistics.median(cpus):5.2f} s"
                  f"  | {len(rows)} rows | load avg {min(loads):.1f}-{max(loads):.1f} | "
                  f"target <= {target:.0f} s: {'met' if median <= target else 'MISSED'}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--namesrv", help="an existing cluster's name server")
    parser.add_argument("--fill", action="store_true",
                        help="with -n: fill that cluster first (its brokers' masters)")
    parser.add_argument("--big", action="store_true",
                        help="with -n: a cluster benchmarks.big_cluster filled (the output "
                             "is checked)")
    opts = parser.parse_args()
    print(f"bench_console_cli | {machine()}", flush=True)
    if opts.namesrv is None:
        with big.big_cluster() as cluster:
            measure(cluster.namesrv, True)
        return
    if opts.fill:
        cluster = asyncio.run(big.existing(opts.namesrv))
        BROKERS[0] = len(cluster.brokers)
        asyncio.run(big.populate(cluster))
        heartbeats = big.Heartbeats(cluster)
        heartbeats.start()
        try:
            asyncio.run(big.wait_online(cluster))
            measure(opts.namesrv, True)
        finally:
            heartbeats.stop()
        return
    if opts.big:
        BROKERS[0] = len(asyncio.run(big.existing(opts.namesrv)).brokers)
    measure(opts.namesrv, opts.big)


if __name__ == "__main__":
    main()
