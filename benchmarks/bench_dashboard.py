"""Dashboard responsiveness on a cluster of 1,000 topics and 300 consumer groups.

A name server and a broker run as processes; the dashboard runs headless (Textual's
`run_test`) in this process, as it would on a terminal.  Measured:

- first paint: from creating the app to the first screen showing its data (Topics, Consumer
  groups, Cluster), a fresh app each run;
- full refresh: the time a screen's refresh takes (its `fetch` on the backend thread), and
  the CPU time this process spent per refresh;
- key latency while a refresh runs: a key event posted to the app until the table's cursor
  has moved, with a refresh started just before each key.

Run: ``python -m benchmarks.bench_dashboard`` (BENCH_TOPICS / BENCH_GROUPS / BENCH_ROUNDS in
the environment change the size).  Medians, 95th percentiles and maxima are printed with
the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Callable

from textual import events
from textual.message import Message as UIMessage

from benchmarks.bench_client import namesrv_process
from benchmarks.machine import machine
from benchmarks.processes import broker_process
from engine.client import ClientConfig, Message, Producer
from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from mqadmin.config import Endpoint
from mqadmin.tui.app import Dashboard
from mqadmin.tui.events import Loaded
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import RowTable

TOPICS = int(os.environ.get("BENCH_TOPICS", "1000"))
GROUPS = int(os.environ.get("BENCH_GROUPS", "300"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
CONCURRENCY = 32


async def populate(ns: str, broker: str) -> None:
    """TOPICS topics of 4 queues, GROUPS groups each committed on one topic with a backlog."""
    async with MQAdmin(ns) as admin:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def topic(i: int) -> None:
            async with gate:
                await admin.broker.create_topic(broker, TopicConfig(f"BenchTopic{i:04d}", 4, 4))

        async def group(i: int) -> None:
            async with gate:
                name, t = f"bench-group-{i:03d}", f"BenchTopic{i % TOPICS:04d}"
                await admin.broker.create_group(broker, SubscriptionGroupConfig(name))
                await admin.broker.update_consumer_offset(broker, name, t, 0, 0)

        await asyncio.gather(*(topic(i) for i in range(TOPICS)))
        await asyncio.gather(*(group(i) for i in range(GROUPS)))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the broker re-registers its topics
            with contextlib.suppress(ClientError):
                listed = (await admin.namesrv.all_topics()).topic_list
                if sum(1 for t in listed if t.startswith("BenchTopic")) >= TOPICS:
                    break
            await asyncio.sleep(0.5)
        else:
            raise SystemExit("the name server never listed every topic")
    producer = Producer("BENCH_PG", ClientConfig(namesrv_addr=ns))
    await producer.start()
    try:  # a backlog of 3 messages for each group
        for i in range(GROUPS):
            topic_name = f"BenchTopic{i % TOPICS:04d}"
            for _ in range(3):
                await producer.send(Message(topic_name, b"x" * 100))
    finally:
        await producer.shutdown()


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


async def first_paint(ns: str, start: str) -> float:
    began = time.perf_counter()
    app = Dashboard(Endpoint([ns]), start=start)
    async with app.run_test(size=(160, 48)):
        await until(lambda: isinstance(app.screen, DashScreen) and app.screen.loads >= 1)
        return time.perf_counter() - began


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


async def measure(ns: str) -> None:
    for start in ("topics", "groups", "cluster"):
        paints = [await first_paint(ns, start) for _ in range(5)]
        print(summary(f"first paint, {start}", paints))
        elapsed, cpu, keys = await refreshes(ns, start)
        print(summary(f"full refresh, {start}", elapsed))
        print(summary(f"CPU of this process per refresh, {start}", cpu))
        if keys:
            print(summary(f"key latency during a refresh, {start}", keys))


def main() -> None:
    print(f"bench_dashboard: {TOPICS} topics, {GROUPS} groups | {machine()}")
    with namesrv_process() as ns, broker_process(namesrvAddr=ns) as broker:
        began = time.perf_counter()
        asyncio.run(populate(ns, broker))
        print(f"populated in {time.perf_counter() - began:.1f} s; load average "
              f"{os.getloadavg()[0]:.1f}")
        asyncio.run(measure(ns))


if __name__ == "__main__":
    main()
