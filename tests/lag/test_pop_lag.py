"""A POP group's lag on the monitor, against a real broker with a `PopConsumer`: of the lag,
the messages in flight (popped, not acked) and ready, in the sampler, `lag status`, the
collector's /metrics, window and Parquet history; and its verdict while the consumer holds
its messages (not STALL, not STOP) and once it acks them (consuming)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.pop_consumer import PopConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import MessageExt
from engine.client.core.pop_calls import AckStatus
from engine.protocol.body.heartbeat import ConsumeFromWhere
from mqadmin.commands import lag_watch
from mqadmin.operations.lag import status as st
from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.metrics import MetricsServer
from mqadmin.operations.lag.model import QueueSample, Series
from mqadmin.operations.lag.sample import Sampler
from mqadmin.operations.lag.verdict import queue_verdict
from mqadmin.reports.contract import Rule, Status
from tests.lag.conftest import Lab
from tests.lag.test_metrics import one, scrape
from tests.mqadmin.cli import invoke

#: What status reads and shows, not rates over time: quick sampling 50 ms apart.
pytestmark = pytest.mark.usefixtures("quick_sampling")

GROUP, TOPIC = "popper", "PopLag"
KEY = (GROUP, TOPIC, "broker-a", 0)


@pytest.fixture
async def consumer(lab: Lab) -> AsyncIterator[PopConsumer]:
    """A POP consumer of `GROUP` online, six messages in the topic's one queue."""
    await lab.group(GROUP, TOPIC, queues=1)
    await lab.send(TOPIC, 6, queue_id=0)
    c = PopConsumer(GROUP, ClientConfig(namesrv_addr=lab.ns, client_ip="127.0.0.1"),
                    options=PopOptions(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                       poll_time_millis=1000))
    c.subscribe(TOPIC)
    await c.start()
    try:
        yield c
    finally:
        await c.shutdown()


async def popped(c: PopConsumer, n: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with asyncio.timeout(20):
        while len(got) < n:
            got += await c.receive(max_nums=n - len(got))
    return got


async def acked(c: PopConsumer, msgs: list[MessageExt]) -> None:
    for m in msgs:
        assert await c.ack(m) is AckStatus.OK


def sample_of(samples: tuple[QueueSample, ...]) -> QueueSample:
    [found] = [s for s in samples if s.key == KEY]
    return found


async def test_in_flight_and_ready_in_samples_status_metrics_window_and_history(
        lab: Lab, consumer: PopConsumer, tmp_path: Path) -> None:
    msgs = await popped(consumer, 4)
    await acked(consumer, msgs[:1])  # 6 sent, 4 taken, 1 acked: 3 in flight, 2 ready
    cycle = await Sampler("test", 1000).sample(lab.admin, [GROUP])
    s = sample_of(cycle.samples)
    assert (s.lag, s.in_flight, s.ready, s.broker_offset) == (5, 3, 2, 6)

    status = await asyncio.to_thread(invoke, "lag", "status", "-n", lab.ns, "-g", GROUP,
                                     "-o", "json")
    assert status.exit_code == 0, status.stderr
    [row] = json.loads(status.stdout)
    assert (row["group"], row["lag"], row["ready"], row["inFlight"]) == (GROUP, 5, 2, 3)
    assert row["verdict"] != "ERROR"  # online, and three samples are too short to judge
    queues = await asyncio.to_thread(invoke, "lag", "status", "-n", lab.ns, "-g", GROUP,
                                     "--queues", "-o", "json")
    [q] = json.loads(queues.stdout)
    assert (q["topic"], q["queueId"], q["lag"], q["ready"], q["inFlight"]) == (TOPIC, 0, 5, 2, 3)
    table = await asyncio.to_thread(invoke, "lag", "status", "-n", lab.ns, "-g", GROUP)
    assert "inFlight" in table.stdout and "ready" in table.stdout
    report = await st.sample_report(lab.admin, "test", group=GROUP, samples=2, spacing=0.1)
    console = Console(record=True, width=240)
    console.print(lag_watch.table(report, "sampled here"))
    [head, line] = [x for x in console.export_text().splitlines() if x.startswith(("┃", "│"))]
    assert [c.strip() for c in head.split("┃")[3:6]] == ["lag", "ready", "in flight"]
    assert [c.strip() for c in line.split("│")[3:6]] == ["5", "2", "3"]

    collector = LagCollector(CollectorConfig((lab.ns,), "test", 200, tmp_path / "data",
                                             window=4, exporter=True, ledger_scope="test"))
    server = MetricsServer(lambda: collector.latest, "127.0.0.1", 0)
    server.start()
    try:
        await collector.open()  # cycles run by hand: exactly two, however busy the machine
        for _ in range(2):
            await collector.cycle()
        await collector.settle()
        found = await scrape(server.url)
    finally:
        await collector.close()
        server.stop()
    where = {"cluster": "test", "group": GROUP, "topic": TOPIC, "broker": "broker-a"}
    assert one(found, "rocketmq_lag_inflight_messages", **where).value == 3
    assert one(found, "rocketmq_lag_ready_messages", **where).value == 2
    assert one(found, "rocketmq_lag_messages", cluster="test", group=GROUP).value == 5

    [series] = win.read_window(win.open_db(), "test", group=GROUP)
    assert [x.in_flight for x in series.samples] == [3, 3]
    files = sorted((tmp_path / "data" / "lag-history").glob("date=*/part-*.parquet"))
    rows = [r for f in files for r in pq.read_table(f, partitioning=None).to_pylist()
            if r["group"] == GROUP]
    assert [(r["lag"], r["in_flight"]) for r in rows] == [(5, 3), (5, 3)]


async def test_a_consumer_holding_its_messages_is_not_stalled_and_acking_is_consuming(
        lab: Lab, consumer: PopConsumer) -> None:
    """Everything taken, one acked: the committed offset stands still, nothing is ready.
    Offset-stuck would call that STALL and the silence STOP; the consumer is online and the
    lag is all in flight, so the lag that never fell is a WARNING.  Acks make it consume."""
    msgs = await popped(consumer, 6)
    await acked(consumer, msgs[:1])
    times = itertools.count(10**12, 10_000)  # a cycle every 10 s, longer than a commit
    sampler = Sampler("test", 10_000, clock=lambda: next(times))
    samples = [sample_of((await sampler.sample(lab.admin, [GROUP])).samples)
               for _ in range(3)]
    assert {(s.consumer_offset, s.lag, s.in_flight, s.ready) for s in samples} == {(1, 5, 5, 0)}
    held = queue_verdict(Series(KEY, tuple(samples)))
    assert (held.status, held.rule_id) == (Status.WARNING, Rule.NOT_DECREASING)
    assert (held.lag, held.in_flight, held.ready) == (5, 5, 0)

    await acked(consumer, msgs[1:3])
    samples.append(sample_of((await sampler.sample(lab.admin, [GROUP])).samples))
    assert (samples[-1].lag, samples[-1].in_flight) == (3, 3)
    moving = queue_verdict(Series(KEY, tuple(samples)))
    assert (moving.status, moving.rule_id) == (Status.OK, Rule.CONSUMING)
