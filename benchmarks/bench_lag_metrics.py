"""What the lag collector's /metrics costs its cycle: the cycle without metrics, with
metrics on (the extra admin reads of lag_extras) and with metrics on and Prometheus-like
scrapes every second; medians of the cycle's wall time, of the metrics duty's (the reads of
lag_extras, which run after the cycle), of this process's CPU per cycle, and the scrape's
own time.

Same cluster as bench_lag (a name server and a broker as processes of their own, GROUPS
groups over QUEUES queues, half of them lagging).  The scraper is a process of its own doing
GET /metrics over HTTP every SCRAPE_EVERY seconds, as Prometheus would; the server's
rendering runs in a thread of the collector's process, so it competes with the cycle for
the CPU and the GIL.  The
issue's target: the exporter adds no more than 10 % to the cycle.

    python -m benchmarks.bench_lag_metrics              # 500 groups x 1000 queues
    python -m benchmarks.bench_lag_metrics 200 400      # groups queues
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_client import namesrv_process
from benchmarks.bench_lag import prepare
from benchmarks.machine import machine, percentile
from benchmarks.processes import broker_process
from engine.remoting.loop import run
from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.metrics import MetricsServer

ROUNDS = 3
BLOCK = 6  # cycles per mode and round
SIZE = (500, 1000)
SCRAPE_EVERY = 1.0
PAUSE = 0.5  # between cycles (and their duty), so scrapes fall on cycles and in between


#: The scraper, a process of its own as Prometheus is: GET the URL every SCRAPE_EVERY seconds
#: until stdin closes, then print the scrape times (s) and the last body's size as JSON.
SCRAPER = """
import json, sys, threading, time
import httpx
url, every = sys.argv[1], float(sys.argv[2])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
times, size = [], 0
with httpx.Client(timeout=30) as client:
    while not done.is_set():
        started = time.perf_counter()
        size = len(client.get(url).content)
        times.append(time.perf_counter() - started)
        if len(times) == 1:
            print("ready", flush=True)
        done.wait(every)
print(json.dumps({"times": times, "size": size}))
"""


class Scraper:
    """The scraper process: ``s = Scraper(url)`` (returns after its first scrape); then
    `s.stop()` fills `times` and `size`."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SCRAPER, url, str(SCRAPE_EVERY)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "ready": imports done, first scrape answered
        self.times: list[float] = []
        self.size = 0

    def stop(self) -> None:
        out, _ = self.proc.communicate("", timeout=60)
        found = json.loads(out)
        self.times, self.size = found["times"][1:], found["size"]


@dataclass(slots=True)
class Mode:
    label: str
    collector: LagCollector
    scrape: bool
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    duties: list[float] = field(default_factory=list)
    scrapes: list[float] = field(default_factory=list)
    size: int = 0


async def block(mode: Mode, url: str, expected: int) -> None:
    """BLOCK cycles of `mode`'s collector (a scraper running throughout when it scrapes)."""
    scraper = Scraper(url) if mode.scrape else None
    try:
        for _ in range(BLOCK):
            wall, cpu = time.perf_counter(), time.process_time()
            cycle = await mode.collector.cycle()
            mode.walls.append(time.perf_counter() - wall)
            reads = time.perf_counter()
            await mode.collector.settle()  # the metrics duty, in the interval's idle time
            mode.duties.append(time.perf_counter() - reads)
            mode.cpus.append(time.process_time() - cpu)
            if len(cycle.samples) != expected or cycle.gaps:
                raise SystemExit(f"cycle saw {len(cycle.samples)} queue samples and "
                                 f"{len(cycle.gaps)} gaps, expected {expected} and 0")
            await asyncio.sleep(PAUSE)
    finally:
        if scraper is not None:
            scraper.stop()
            mode.scrapes += scraper.times
            mode.size = scraper.size


async def measure(namesrv: str, expected: int, tmp: Path) -> list[Mode]:
    def collector(name: str, exporter: bool) -> LagCollector:
        return LagCollector(CollectorConfig(
            (namesrv,), name, 10_000, tmp / name, db_path=tmp / "mqadmin.db",
            flush_cycles=ROUNDS * BLOCK * 3, exporter=exporter))

    plain, exporting = collector("plain", False), collector("exporting", True)
    server = MetricsServer(lambda: exporting.latest, "127.0.0.1", 0)
    server.start()
    modes = [Mode("metrics off", plain, False), Mode("metrics on, no scrape", exporting, False),
             Mode("metrics on, a scrape every 1 s", exporting, True)]
    try:
        for c in (plain, exporting):
            await c.open()
            await c.cycle()  # cold: every time-lag read
            await c.settle()
        for _ in range(ROUNDS):
            for mode in modes:
                await block(mode, server.url, expected)
    finally:
        for c in (plain, exporting):
            await c.close()
        server.stop()
    return modes


def main() -> None:
    groups, queues = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else SIZE
    print(machine())
    with namesrv_process() as namesrv, broker_process(namesrvAddr=namesrv) as broker, \
            tempfile.TemporaryDirectory() as tmp:
        expected = run(prepare(namesrv, broker, groups, queues))
        modes = run(measure(namesrv, expected, Path(tmp)))
    print(f"{groups} groups x {queues} queues ({expected} group-queue samples a cycle); "
          f"{ROUNDS} rounds of {BLOCK} cycles per mode, interleaved, {PAUSE} s apart:")
    base = statistics.median(modes[0].walls)
    for m in modes:
        wall = statistics.median(m.walls)
        print(f"  {m.label:31} cycle wall median {wall:.3f} s (p90 "
              f"{percentile(m.walls, 90):.3f} s, {wall / base - 1:+.1%}); this process's "
              f"CPU per cycle (metrics reads and scrapes included) median "
              f"{statistics.median(m.cpus):.3f} s")
        if m.collector.config.exporter:
            print(f"  {'':31} metrics reads after the cycle (a duty): median "
                  f"{statistics.median(m.duties):.3f} s")
        if m.scrapes:
            print(f"  {'':31} {len(m.scrapes)} scrapes: median "
                  f"{statistics.median(m.scrapes) * 1000:.1f} ms, max "
                  f"{max(m.scrapes) * 1000:.1f} ms, {m.size / 1024:.0f} KiB")
    with_scrape, without = (statistics.median(modes[2].walls),
                            statistics.median(modes[1].walls))
    print(f"  scrapes add {with_scrape / without - 1:+.1%} to the cycle (target: at most "
          f"+10%); metrics on add {without / base - 1:+.1%}")


if __name__ == "__main__":
    main()
