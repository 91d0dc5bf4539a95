"""Retention risk forecast against what cleanup really deletes, and deleteExpiredCommitLog
naming who loses what: --dry-run lists it, the run refuses (exit 4) unless --accept-loss,
the audit log keeps the accepted loss, and old offsets then read as OFFSET_TOO_SMALL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.client.admin import MQAdmin, select_addr
from engine.client.results import PullStatus
from engine.protocol.body.message_queue import MessageQueue
from mqadmin import history
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.lag.model import Series
from mqadmin.operations.lag.retention import RetentionForecaster, Risk
from mqadmin.operations.lag.sample import Sampler
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, start_cluster

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
BODY = b"x" * 64 * 1024  # 16 per 1 MiB segment


@pytest.fixture
def expiring(tmp_path: Path) -> Iterator[BackgroundCluster]:
    """Segments expire at once and any hour is a deleteWhen hour, but the broker's own
    cleanup round never comes during the test (interval 1 h): deletion is triggered."""
    running = start_cluster(tmp_path, file_reserved_time=0, delete_when=EVERY_HOUR,
                            clean_resource_interval=3_600_000)
    try:
        yield running
    finally:
        running.stop()


def fill(cluster: BackgroundCluster) -> None:
    cluster.create_topic("%RETRY%laggard", queues=1)
    cluster.create_topic("%DLQ%laggard", queues=1)
    cluster.create_topic("Bulk", queues=1)
    cluster.send("%DLQ%laggard", b"dead")
    cluster.send("%DLQ%laggard", b"dead")
    for _ in range(20):
        cluster.send("Bulk", BODY)
    cluster.commit("laggard", "Bulk", 0, 3)
    cluster.call(cluster.broker.registration.register_all())  # type: ignore[union-attr]


def forecast(cluster: BackgroundCluster) -> dict[tuple[str, str, str, int], Risk]:
    async def work(admin: MQAdmin) -> dict[tuple[str, str, str, int], Risk]:
        sampler = Sampler("t", 100)
        first = await sampler.sample(admin)
        second = await sampler.sample(admin)
        series = [Series(a.key, (a, b)) for a, b in zip(first.samples, second.samples,
                                                        strict=True)]
        info = await admin.namesrv.cluster_info()
        brokers = {n: a for n, d in info.broker_addr_table.items() if (a := select_addr(d))}
        return await RetentionForecaster().forecast(admin, series, brokers, second.ts)
    result: dict[tuple[str, str, str, int], Risk] = cluster.admin_call(work)
    return result


def queue_min(cluster: BackgroundCluster, topic: str) -> int:
    async def work(admin: MQAdmin) -> int:
        return await admin.broker.min_offset(cluster.broker_addr, topic, 0)
    low: int = cluster.admin_call(work)
    return low


def test_forecast_matches_what_cleanup_deletes(expiring: BackgroundCluster) -> None:
    fill(expiring)
    risks = forecast(expiring)
    risk = risks[("laggard", "Bulk", "broker-a", 0)]
    assert risk.segment == "0" * 20 and risk.consume_rate == 0
    assert 0 < risk.messages < 17 and risk.messages == risk.at_risk
    assert "loses ≈" in risk.text(risk.deletes_at_ms - 60_000)

    dry = invoke("deleteExpiredCommitLog", "-b", expiring.broker_addr, "--dry-run",
                 "-n", expiring.ns, "-o", "json")
    assert dry.exit_code == 0, dry.stderr
    [row] = json.loads(dry.stdout)
    assert row["unconsumed"] == risk.messages + 2
    assert row["losses"] == (f"laggard {risk.messages + 2} (%DLQ%laggard 2, "
                             f"Bulk {risk.messages})")

    refused = invoke("deleteExpiredCommitLog", "-b", expiring.broker_addr, "--yes",
                     "-n", expiring.ns)
    assert refused.exit_code == ExitCode.REJECTED
    assert "--accept-loss" in refused.stderr and "laggard" in refused.stderr
    assert queue_min(expiring, "Bulk") == 0 and history.records() == []

    done = invoke("deleteExpiredCommitLog", "-b", expiring.broker_addr, "--yes",
                  "--accept-loss", "--wait", "20", "-n", expiring.ns, "-o", "json")
    assert done.exit_code == 0, done.stderr
    # the consume queues follow the commit log within the same cleanup round
    deadline = time.monotonic() + 10
    while queue_min(expiring, "Bulk") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    lost = queue_min(expiring, "Bulk") - 3
    assert lost == risk.messages  # the forecast is what cleanup really deleted
    assert queue_min(expiring, "%DLQ%laggard") == 2
    [record] = history.records(detail=True)
    assert record["args"]["accept_loss"] is True
    assert f"laggard {risk.messages + 2}" in record["plan"][0]["after"]

    async def old_offset(admin: MQAdmin) -> tuple[PullStatus, int]:
        result = await admin.broker.pull_records(
            expiring.broker_addr, MessageQueue("Bulk", "broker-a", 0), 3, max_nums=1)
        return result.status, result.next_begin_offset
    assert expiring.admin_call(old_offset) == (PullStatus.OFFSET_ILLEGAL, lost + 3)
