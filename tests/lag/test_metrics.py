"""The collector's /metrics against a real broker, scraped over HTTP and parsed by
prometheus_client's parser: rocketmq-exporter's families with its label names, and the
verdict, time lag and dead letters of a group left behind."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.metrics import EXPORTER, FAMILIES, OURS, MetricsServer
from tests.lag.conftest import Lab

Scrape = dict[str, list[Sample]]


async def scrape(url: str) -> Scrape:
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.get(url)
    resp.raise_for_status()
    assert resp.headers["content-type"].startswith("text/plain")
    found: Scrape = {}
    for family in text_string_to_metric_families(resp.text):
        name = family.name + ("_total" if family.type == "counter" else "")
        found[name] = [s for s in family.samples if not s.name.endswith("_created")]
    return found


def one(found: Scrape, name: str, **labels: str) -> Sample:
    hits = [s for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, found[name])
    return hits[0]


def collector_of(lab: Lab, tmp_path: Path) -> LagCollector:
    return LagCollector(CollectorConfig((lab.ns,), "test", 200, tmp_path / "data", window=4,
                                        exporter=True, ledger_scope="test"))


async def test_a_group_left_behind_on_metrics(lab: Lab, tmp_path: Path) -> None:
    await lab.group("g1", "T1")
    await lab.topic("%DLQ%g1", 1)
    await lab.send("T1", 6, queue_id=0)
    await lab.send("%DLQ%g1", 2, queue_id=0)
    await lab.commit("g1", "T1", 0, 1)  # nobody online, no more commits: STOP
    collector = collector_of(lab, tmp_path)
    server = MetricsServer(lambda: collector.latest, "127.0.0.1", 0)
    server.start()
    try:
        empty = await scrape(server.url)  # before the first cycle: every family, no samples
        assert set(empty) == {f.name + ("_total" if f.kind == "counter" else "")
                              for f in FAMILIES}
        assert not any(empty.values())
        await collector.start_collecting()
        for _ in range(3):
            await collector.next_cycle()
        await collector.settle()  # the metrics duty's reads (brokers, consumers, DLQ) done
        found = await scrape(server.url)
    finally:
        await collector.stop()
        server.stop()
    for f in EXPORTER + OURS:
        name = f.name + ("_total" if f.kind == "counter" else "")
        assert all(set(s.labels) == set(f.labels) for s in found[name]), name
    cluster = lab.broker.state.config.broker_cluster_name
    diff = one(found, "rocketmq_group_diff", group="g1", topic="T1")
    assert diff.value == 5 and diff.labels["countOfOnlineConsumers"] == "0"
    assert diff.labels["msgModel"] == "1"  # CLUSTERING's ordinal, as rocketmq-exporter
    where = {"cluster": cluster, "broker": "broker-a", "topic": "T1", "group": "g1"}
    assert one(found, "rocketmq_consumer_offset", **where).value == 1
    assert one(found, "rocketmq_group_get_latency_by_storetime", **where).value > 0
    assert one(found, "rocketmq_producer_offset", cluster=cluster, topic="T1").value == 6
    assert one(found, "rocketmq_topic_dlq_offset", group="g1").value == 2
    verdict = one(found, "rocketmq_lag_verdict", cluster="test", group="g1")
    assert verdict.value == 1 and verdict.labels["verdict"] == "STOP"
    assert verdict.labels["status"] == "ERROR" and verdict.labels["rule"] == "no-commit"
    assert one(found, "rocketmq_lag_severity", group="g1").value == 5
    assert one(found, "rocketmq_lag_messages", group="g1").value == 5
    assert one(found, "rocketmq_lag_seconds", group="g1").value > 0
    assert math.isinf(one(found, "rocketmq_lag_eta_seconds", group="g1").value)
    assert one(found, "rocketmq_lag_dead_letters", group="g1").value == 2
    assert one(found, "rocketmq_lag_dead_letters_unhandled", group="g1").value == 2
    assert one(found, "rocketmq_lag_broker_slaves", broker="broker-a").value == 0
    assert one(found, "rocketmq_lag_cycles_total", cluster="test").value >= 3
    ratio = one(found, "rocketmq_brokeruntime_commitlog_disk_ratio", cluster=cluster)
    assert 0 <= ratio.value <= 1 and ratio.labels["brokerIP"] == lab.addr


async def test_server_stops_and_a_port_in_use_is_refused(lab: Lab, tmp_path: Path) -> None:
    collector = collector_of(lab, tmp_path)
    server = MetricsServer(lambda: collector.latest, "127.0.0.1", 0)
    server.start()
    port = server.port
    taken = MetricsServer(lambda: collector.latest, "127.0.0.1", port)
    try:
        try:
            taken.start()
        except OSError:
            pass
        else:
            raise AssertionError("a second server started on a port in use")
    finally:
        server.stop()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nobody listens any more
