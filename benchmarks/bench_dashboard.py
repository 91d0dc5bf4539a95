"""Dashboard responsiveness on a big cluster: 10,000 topics of 8 queues on two broker sets,
3,000 consumer groups, consumers online for 300 of them (`benchmarks.big_cluster`).

The name server and brokers run as processes; the dashboard runs headless (Textual's
`run_test`) in this process, as it would on a terminal.  Measured:

- first paint: from creating the app to the first screen showing its rows (Topics, Consumer
  groups, Cluster), a fresh app each run; a screen that draws a quick partial view first
  (`DashScreen.fetch_first`: Topics without groups and backlog, Consumer groups without
  clients and verdicts) is also timed to all its columns filled (its first full refresh
  drawn), with the CPU of each;
- full refresh: the time a screen's refresh takes (its `fetch` on the backend thread), and
  the CPU time this process spent per refresh;
- key latency while a refresh runs: a key event posted to the app until the table's cursor
  has moved, with a refresh started just before each key.

Run: ``python -m benchmarks.bench_dashboard`` (BENCH_TOPICS / BENCH_GROUPS / BENCH_ONLINE
change the size, BENCH_ROUNDS / BENCH_PAINTS the repetitions), or ``-n ADDR`` to measure a
cluster that ``python -m benchmarks.big_cluster`` filled and keeps.  Medians, 95th
percentiles and maxima are printed with the machine and the load average (the CPU times
say more than the wall times on a busy machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable

from textual import events
from textual.message import Message as UIMessage

from benchmarks import big_cluster as big
from benchmarks.machine import machine
from mqadmin.config import Endpoint
from mqadmin.tui.app import Dashboard
from mqadmin.tui.events import Loaded
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import RowTable

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
PAINTS = int(os.environ.get("BENCH_PAINTS", "5"))


def summary(name: str, values: list[float], unit: str = "ms", scale: float = 1000) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"{name:<44} median {statistics.median(values) * scale:8.1f} {unit}   "
            f"p95 {p95 * scale:8.1f} {unit}   max {max(values) * scale:8.1f} {unit}   "
            f"(n={len(values)})")


async def until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await asyncio.sleep(0.001)


async def first_paint(ns: str, start: str) -> tuple[float, float, float, float]:
    """Seconds to the first screen with its rows and to all its columns filled (the same
    for a screen without a partial first view), and the CPU seconds this process (UI and
    backend threads) spent on each."""
    began, used = time.perf_counter(), time.process_time()
    app = Dashboard(Endpoint([ns]), start=start)
    async with app.run_test(size=(160, 48)):
        await until(lambda: isinstance(app.screen, DashScreen) and app.screen.loads >= 1)
        rows, rows_cpu = time.perf_counter() - began, time.process_time() - used
        screen = app.screen
        assert isinstance(screen, DashScreen)
        if screen.partial_first:
            await until(lambda: screen.loads >= 2)
        return (rows, rows_cpu, time.perf_counter() - began, time.process_time() - used)


async def refreshes(ns: str, start: str) -> tuple[list[float], list[float], list[float]]:
    """Refresh times, CPU seconds of this process per refresh, key latencies."""
    app = Dashboard(Endpoint([ns]), start=start)
    elapsed: list[float] = []
    cpu: list[float] = []
    keys: list[float] = []
    seen: list[float] = []

    def hook(message: UIMessage) -> None:
        if isinstance(message, Loaded):
            seen.append(message.elapsed)

    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        screen = app.screen
        assert isinstance(screen, DashScreen)
        await until(lambda: screen.loads >= 1)
        table = screen.query_one(RowTable)
        table.focus()
        await pilot.pause()
        seen.clear()
        for _ in range(ROUNDS):
            loads, used = screen.loads, time.process_time()
            screen.action_refresh_now()
            await until(lambda: screen.loads > loads)  # noqa: B023
            cpu.append(time.process_time() - used)
        elapsed += seen
        for i in range(ROUNDS * 3 if table.row_count > 1 else 0):
            loads = screen.loads
            screen.action_refresh_now()
            await asyncio.sleep(0.02)  # the refresh is under way
            row = table.cursor_row
            key = "down" if i % 2 == 0 else "up"
            pressed = time.perf_counter()
            app.post_message(events.Key(key, None))
            await until(lambda: table.cursor_row != row)  # noqa: B023
            keys.append(time.perf_counter() - pressed)
            await until(lambda: screen.loads > loads)  # noqa: B023
    return elapsed, cpu, keys


SCREENS = ("topics", "groups", "cluster")


async def measure(ns: str, screens: tuple[str, ...] = SCREENS) -> None:
    for start in screens:
        paints = [await first_paint(ns, start) for _ in range(PAINTS)]
        print(summary(f"first paint (rows), {start}", [p[0] for p in paints]))
        print(summary(f"CPU of this process to first rows, {start}", [p[1] for p in paints]))
        print(summary(f"first paint (all columns), {start}", [p[2] for p in paints]))
        print(summary(f"CPU of this process to all columns, {start}", [p[3] for p in paints]),
              flush=True)
        elapsed, cpu, keys = await refreshes(ns, start)
        print(summary(f"full refresh, {start}", elapsed))
        print(summary(f"CPU of this process per refresh, {start}", cpu))
        if keys:
            print(summary(f"key latency during a refresh, {start}", keys))
        print(f"  (load average {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--namesrv", help="a cluster benchmarks.big_cluster filled")
    parser.add_argument("-s", "--screens", default=",".join(SCREENS),
                        help="the screens measured, comma-separated (default: %(default)s)")
    opts = parser.parse_args()
    screens = tuple(opts.screens.split(","))
    print(f"bench_dashboard | {machine()}", flush=True)
    if opts.namesrv:
        print(f"on {opts.namesrv}; load average {os.getloadavg()[0]:.1f}", flush=True)
        asyncio.run(measure(opts.namesrv, screens))
        return
    with big.big_cluster() as cluster:
        asyncio.run(measure(cluster.namesrv, screens))


if __name__ == "__main__":
    main()
