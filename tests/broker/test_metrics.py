"""The broker's Prometheus metrics (metricsExporterType=PROM): values and labels after real
sends and pulls, the /metrics endpoint, and that DISABLE never loads prometheus_client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from engine.broker.config import MetricsExporterType
from engine.broker.controller import BrokerController
from engine.broker.metrics.exporter import MetricsExporter, MetricsPortInUseError
from engine.protocol.codes import ResponseCode
from engine.protocol.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from engine.remoting.client import RemotingClient

from .conftest import broker_configs
from .helpers import heartbeat, pull_request, send_request
from .test_transaction import PGROUP, TOPIC, Producer, checker, end, send_half

ROOT = Path(__file__).resolve().parents[2]
NODE = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}


@pytest.fixture
def broker(prom_broker: BrokerController) -> BrokerController:
    return prom_broker


def exporter(broker: BrokerController) -> MetricsExporter:
    assert broker.metrics is not None
    return broker.metrics


def value(broker: BrokerController, name: str, **labels: str) -> float | None:
    return exporter(broker).registry.get_sample_value(name, {**NODE, **labels})


def one_scrape(broker: BrokerController) -> Callable[..., float | None]:
    """`value` over a single collection: figures read at scrape time (latencies measured
    from now) compare within it, not across two scrapes milliseconds apart."""
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for metric in exporter(broker).registry.collect() for s in metric.samples}

    def read(name: str, **labels: str) -> float | None:
        return samples.get((name, frozenset({**NODE, **labels}.items())))
    return read


async def test_send_and_pull_show_in_the_metrics(broker: BrokerController,
                                                 client: RemotingClient) -> None:
    addr = broker.addr
    resp = await client.invoke(addr, heartbeat("client@1", consumer_group="CG",
                                               topics=("Orders",)))
    assert resp.code == ResponseCode.SUCCESS  # CG has a consumer online
    bodies = [b"a" * 100, b"b" * 200, b"c" * 2000]
    for body in bodies:
        resp = await client.invoke(addr, send_request("Orders", body, queue_id=0))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    pulled = await client.invoke(addr, pull_request("Orders", 0, 0, group="CG"))
    assert pulled.code == ResponseCode.SUCCESS
    committed = await client.invoke(addr, pull_request("Orders", 0, 3, group="CG",
                                                       commit_offset=1))
    assert committed.code == ResponseCode.PULL_NOT_FOUND
    assert broker.state.offsets.query("CG", "Orders", 0) == 1

    topic = {"topic": "Orders", "message_type": "normal", "is_system": "false"}
    assert value(broker, "rocketmq_messages_in_total", **topic) == 3
    assert value(broker, "rocketmq_throughput_in_total", **topic) == sum(map(len, bodies))
    assert value(broker, "rocketmq_message_size_bucket", le="1024.0", **topic) == 2
    assert value(broker, "rocketmq_message_size_bucket", le="4096.0", **topic) == 3
    assert value(broker, "rocketmq_message_size_bucket", le="+Inf", **topic) == 3
    assert value(broker, "rocketmq_message_size_count", **topic) == 3
    assert value(broker, "rocketmq_message_size_sum", **topic) == 2300

    out = {"topic": "Orders", "consumer_group": "CG", "is_system": "false"}
    assert value(broker, "rocketmq_messages_out_total", **out) == 3
    assert value(broker, "rocketmq_throughput_out_total", **out) is not None

    lag = {"topic": "Orders", "consumer_group": "CG", "is_retry": "false", "is_system": "false"}
    assert value(broker, "rocketmq_consumer_lag_messages", **lag) == 2
    assert value(broker, "rocketmq_consumer_ready_messages", **lag) == 2
    assert value(broker, "rocketmq_consumer_inflight_messages", **lag) == 0
    scrape = one_scrape(broker)
    latency = scrape("rocketmq_consumer_lag_latency_milliseconds", **lag)
    assert latency is not None and 0 <= latency < 60_000
    assert scrape("rocketmq_consumer_queueing_latency_milliseconds", **lag) == latency

    st = broker.state
    assert value(broker, "rocketmq_topic_number") == len(st.topics.table)
    assert value(broker, "rocketmq_consumer_group_number") == len(st.groups.table)
    assert value(broker, "rocketmq_broker_permission") == st.config.broker_permission
    storage = {"storage_type": "local", "storage_medium": "disk"}
    assert (value(broker, "rocketmq_storage_size_bytes", **storage) or 0) > 0
    assert value(broker, "rocketmq_storage_flush_behind_bytes", **storage) is not None
    assert value(broker, "rocketmq_storage_dispatch_behind_bytes", **storage) == 0
    reserve = value(broker, "rocketmq_storage_message_reserve_time_milliseconds", **storage)
    assert reserve is not None and reserve >= 0


async def test_connections_by_language_version_and_mode(broker: BrokerController,
                                                        client: RemotingClient) -> None:
    resp = await client.invoke(broker.addr, heartbeat(
        "client@1", consumer_group="CG", topics=("Orders",), producer_group="PG"))
    assert resp.code == ResponseCode.SUCCESS
    samples = {m.name: m.samples for m in exporter(broker).registry.collect()}
    [producer] = samples["rocketmq_producer_connections"]
    assert producer.value == 1
    assert producer.labels["protocol_type"] == "remoting" and producer.labels["language"]
    assert producer.labels["version"].startswith("v")
    [consumer] = samples["rocketmq_consumer_connections"]
    assert consumer.value == 1
    assert {k: consumer.labels[k] for k in ("consumer_group", "consume_mode", "is_system")} == {
        "consumer_group": "CG", "consume_mode": "push", "is_system": "false"}
    assert {k: consumer.labels[k] for k in NODE} == NODE


async def test_dead_letters_count_by_group(broker: BrokerController,
                                           client: RemotingClient) -> None:
    broker.state.groups.find_or_create("CG")
    resp = await client.invoke(broker.addr, send_request("%RETRY%CG", b"dead",
                                                         reconsume_times=16))
    assert resp.code == ResponseCode.SUCCESS
    assert value(broker, "rocketmq_send_to_dlq_messages_total", consumer_group="CG",
                 topic="%DLQ%CG", is_system="false") == 1
    # Retry and DLQ topics stay out of messages in, as in 5.3.
    names = {s.labels.get("topic") for m in exporter(broker).registry.collect()
             if m.name == "rocketmq_messages_in" for s in m.samples}
    assert not any(t and t.startswith("%") for t in names)


async def test_transactions_commits_rollbacks_and_half_messages(
        broker: BrokerController) -> None:
    client = RemotingClient(checker, Producer())
    try:
        resp = await client.invoke(broker.addr, heartbeat("tx@1", producer_group=PGROUP))
        assert resp.code == ResponseCode.SUCCESS
        halves = [await send_half(client, broker, f"tx-{i}") for i in range(4)]
        assert (await end(client, broker, halves[0], TRANSACTION_COMMIT_TYPE)).code == 0
        assert (await end(client, broker, halves[1], TRANSACTION_ROLLBACK_TYPE)).code == 0
        assert (await end(client, broker, halves[2], TRANSACTION_COMMIT_TYPE)).code == 0
    finally:
        await client.close()
    assert value(broker, "rocketmq_commit_messages_total", topic=TOPIC) == 2
    assert value(broker, "rocketmq_rollback_messages_total", topic=TOPIC) == 1
    assert value(broker, "rocketmq_half_messages", topic=TOPIC) == 1
    assert value(broker, "rocketmq_messages_in_total", topic=TOPIC, message_type="transaction",
                 is_system="false") == 6  # four halves, two commits


async def test_metrics_endpoint_serves_the_exposition(broker: BrokerController,
                                                      client: RemotingClient) -> None:
    resp = await client.invoke(broker.addr, send_request("Orders", b"x"))
    assert resp.code == ResponseCode.SUCCESS
    base = f"http://127.0.0.1:{exporter(broker).port}"
    async with httpx.AsyncClient(timeout=10) as http:
        page = await http.get(f"{base}/metrics")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/plain")
        assert ('rocketmq_messages_in_total{cluster="DefaultCluster",is_system="false",'
                'message_type="normal",node_id="broker-a",node_type="broker",topic="Orders"} 1.0'
                in page.text)
        assert "# TYPE rocketmq_message_size histogram" in page.text
        assert (await http.get(f"{base}/")).status_code == 404
        assert (await http.post(f"{base}/metrics")).status_code == 405


async def test_metrics_port_in_use_fails_the_start(tmp_path: Path,
                                                   broker: BrokerController) -> None:
    port = exporter(broker).port
    config, store = broker_configs(tmp_path / "other", None, name="broker-b",
                                   metrics_exporter_type=MetricsExporterType.PROM,
                                   metrics_prom_exporter_host="127.0.0.1",
                                   metrics_prom_exporter_port=port)
    other = BrokerController(config, store)
    try:
        with pytest.raises(MetricsPortInUseError, match=f"metrics port {port} .* already in use"):
            await other.start()
    finally:
        await other.stop()  # what mqbroker does after a failed start: releases every port


def test_disabled_metrics_never_import_prometheus_client() -> None:
    code = ("import sys, engine.broker.main, engine.broker.controller\n"
            "print('prometheus_client' in sys.modules or 'engine.broker.metrics.rpc' in "
            "sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


async def test_a_later_scrape_sees_what_changed(broker: BrokerController,
                                                client: RemotingClient) -> None:
    addr = broker.addr
    for body in (b"a", b"b", b"c"):
        assert (await client.invoke(addr, send_request("Again", body))).code == 0
    await client.invoke(addr, pull_request("Again", 0, 0, group="CG", max_nums=1))
    await client.invoke(addr, pull_request("Again", 0, 1, group="CG", commit_offset=1))
    topic = {"topic": "Again", "message_type": "normal", "is_system": "false"}
    lag = {"topic": "Again", "consumer_group": "CG", "is_retry": "false", "is_system": "false"}
    assert value(broker, "rocketmq_messages_in_total", **topic) == 3
    assert value(broker, "rocketmq_consumer_lag_messages", **lag) == 2
    first = value(broker, "rocketmq_consumer_lag_latency_milliseconds", **lag)

    assert (await client.invoke(addr, send_request("Again", b"d" * 5000))).code == 0
    await client.invoke(addr, pull_request("Again", 0, 3, group="CG", commit_offset=3))
    assert value(broker, "rocketmq_messages_in_total", **topic) == 4
    assert value(broker, "rocketmq_message_size_bucket", le="4096.0", **topic) == 3
    assert value(broker, "rocketmq_message_size_bucket", le="+Inf", **topic) == 4
    assert value(broker, "rocketmq_consumer_lag_messages", **lag) == 1
    st = broker.state
    stored = st.store.get_message_store_timestamp("Again", 0, 3)  # the next one to consume
    before = st.clock()
    later = value(broker, "rocketmq_consumer_lag_latency_milliseconds", **lag)
    assert first is not None and later is not None
    assert before - stored <= later <= st.clock() - stored
    # committed past every message: no lag, no latency
    await client.invoke(addr, pull_request("Again", 0, 4, group="CG", commit_offset=4))
    assert value(broker, "rocketmq_consumer_lag_messages", **lag) == 0
    assert value(broker, "rocketmq_consumer_lag_latency_milliseconds", **lag) == 0


async def test_a_group_without_consumers_online_shows_its_lag_only(
        broker: BrokerController, client: RemotingClient) -> None:
    addr = broker.addr
    for body in (b"a", b"b"):
        assert (await client.invoke(addr, send_request("Left", body))).code == 0
    await client.invoke(addr, pull_request("Left", 0, 1, group="Gone", commit_offset=1))
    lag = {"topic": "Left", "consumer_group": "Gone", "is_retry": "false", "is_system": "false"}
    assert value(broker, "rocketmq_consumer_lag_messages", **lag) == 1
    latency = value(broker, "rocketmq_consumer_lag_latency_milliseconds", **lag)
    assert latency is not None and latency >= 0
    for name in ("rocketmq_consumer_ready_messages", "rocketmq_consumer_inflight_messages",
                 "rocketmq_consumer_queueing_latency_milliseconds"):
        assert value(broker, name, **lag) is None, name
