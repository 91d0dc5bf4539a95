"""The collector against a real broker: window, Parquet history, webhook events, duties,
a broker restart (gaps, then samples again), resume after a restart of the collector."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pyarrow.parquet as pq

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from mqadmin.operations.lag import window as win
from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.model import Cycle
from mqadmin.reports.schema import arrow_schema
from tests.broker.conftest import broker_configs
from tests.conftest import namesrv_config
from tests.lag.conftest import Lab
from tests.lag.webhook_server import WebhookServer


def config(lab: Lab, tmp_path: Path, hooks: tuple[str, ...] = ()) -> CollectorConfig:
    return CollectorConfig((lab.ns,), "test", 200, tmp_path / "data", hooks, window=4)


async def test_collector_window_history_webhook_and_duty(lab: Lab, tmp_path: Path) -> None:
    await lab.group("g1", "T1")
    await lab.send("T1", 6, queue_id=0)
    await lab.commit("g1", "T1", 0, 1)  # nobody online: STOP once commits stop
    duty_runs: list[int] = []

    async def duty(collector: LagCollector, cycle: Cycle) -> None:
        duty_runs.append(len(cycle.samples))

    with WebhookServer(fail_first=1) as hook:
        collector = LagCollector(config(lab, tmp_path, (hook.url,)))
        collector.add_duty("count", duty)
        await collector.start_collecting()
        try:
            for _ in range(3):
                await collector.next_cycle()
            collector.post_event("report_done", {"path": "x.html"})
            event = await asyncio.to_thread(hook.take, "verdict_changed")
            assert event["group"] == "g1" and event["to"] == "ERROR"
            assert event["rule"].startswith("STOP") and event["cluster"] == "test"
            assert (event["lag"], event["ready"], event["in_flight"]) == (5, 5, 0)
            assert (await asyncio.to_thread(hook.take, "report_done"))["path"] == "x.html"
        finally:
            await collector.stop()
    assert duty_runs and all(n == 2 for n in duty_runs)
    db = win.open_db()
    series = win.read_window(db, "test")
    assert {s.key for s in series} == {("g1", "T1", "broker-a", 0), ("g1", "T1", "broker-a", 1)}
    assert win.load_state(db, "test")["g1"][0] == "ERROR"
    files = sorted((tmp_path / "data" / "lag-history").glob("date=*/part-*.parquet"))
    assert len(files) == 2  # the first cycle at once, the rest at stop
    tables = [pq.read_table(f, partitioning=None) for f in files]
    assert all(t.schema.equals(arrow_schema()) for t in tables)
    assert tables[0].num_rows == 2
    rows = [r for t in tables for r in t.to_pylist()]
    assert len(rows) == 2 * collector.cycles and all(r["ok"] for r in rows)
    assert {r["lag"] for r in rows if r["queue_id"] == 0} == {5}


async def test_collector_survives_a_broker_restart(lab: Lab, tmp_path: Path) -> None:
    await lab.group("g1", "T1")
    await lab.send("T1", 3, queue_id=0)
    await lab.commit("g1", "T1", 0, 1)
    collector = LagCollector(config(lab, tmp_path))
    await collector.start_collecting()
    again: BrokerController | None = None
    try:
        assert (await collector.next_cycle()).samples
        await lab.broker.stop()
        gap = await collector.next_cycle()
        assert not gap.samples and [(g.group, g.broker) for g in gap.gaps] == [
            ("g1", "broker-a")]
        broker_cfg, store_cfg = broker_configs(tmp_path, lab.ns)
        again = BrokerController(broker_cfg, store_cfg)
        await again.start()
        for _ in range(20):
            back = await collector.next_cycle()
            if back.samples:
                break
        assert {s.lag for s in back.samples if s.queue_id == 0} == {2}
    finally:
        await collector.stop()
        if again is not None:
            await again.stop()
    rows = pq.read_table(tmp_path / "data" / "lag-history", partitioning=None).to_pylist()
    gaps = [r for r in rows if not r["ok"]]
    assert gaps and all(r["queue_id"] == -1 and r["lag"] is None and r["topic"] == ""
                        for r in gaps)
    resumed = LagCollector(config(lab, tmp_path))
    await asyncio.to_thread(resumed._resume)
    assert resumed.sampler.previous and resumed.window


async def test_collector_survives_a_name_server_outage(lab: Lab, tmp_path: Path) -> None:
    await lab.group("g1", "T1")
    await lab.commit("g1", "T1", 0, 0)
    port = lab.namesrv.port
    collector = LagCollector(config(lab, tmp_path))
    await collector.start_collecting()
    again: NamesrvController | None = None
    try:
        assert (await collector.next_cycle()).samples
        await lab.namesrv.stop()
        down = await collector.next_cycle()
        assert down.error.startswith("name servers:") and not down.samples
        assert {(g.group, g.broker) for g in down.gaps} == {("g1", "broker-a")}
        again = NamesrvController(dataclasses.replace(namesrv_config(tmp_path / "ns2"),
                                                      listen_port=port))
        await again.start()
        await lab.broker.registration.register_all()
        for _ in range(20):
            back = await collector.next_cycle()
            if back.samples:
                break
        assert back.ok and {s.group for s in back.samples} == {"g1"}
    finally:
        await collector.stop()
        if again is not None:
            await again.stop()
    cycles = win.cycles(win.open_db(), "test")
    assert any(c.error for c in cycles) and cycles[-1].error == ""
