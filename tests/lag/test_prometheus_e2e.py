"""Issue 26's end to end: a real Prometheus scrapes a real broker (metricsExporterType=PROM)
and a real lag collector's /metrics, with the shipped alert rules loaded (a copy whose `for:`
durations are shortened); a query returns the lag of a group left behind, its alert goes
pending, and every metric the shipped rules and dashboard query is in one of the scrapes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.metrics import MetricsServer
from tests.lag.conftest import Lab
from tests.lag.test_deploy import RULES, check_served, scrape_text, served
from tests.prometheus import PrometheusLauncher, Result

#: The rules' `for:` in the test's copy: long enough to be seen pending, short for a test.
FOR = "1s"
#: Each wait's bound: the first scrapes, a few collector cycles and rule evaluations.
TIMEOUT = 20.0
#: Scrape and rule evaluation interval (and scrape timeout).  Prometheus 2.x hands its scrape
#: manager the static targets only at its first 5 s reload tick: the first scrape comes
#: 5 s after the start plus up to one interval, and each pending state one evaluation later.
INTERVAL = "500ms"


def quick_rules(tmp_path: Path) -> Path:
    """The shipped rules with every `for:` set to FOR (the shipped file is left as it is)."""
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    for rule in rules:
        if "for" in rule:
            rule["for"] = FOR
    assert any("for" in r for r in rules)
    path = tmp_path / "rocketmq-alerts.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    return path


def values(result: Result) -> list[float]:
    return [float(sample["value"][1]) for sample in result]


def stopped(group: str) -> Callable[[Result], bool]:
    """Alerts holding RocketMQGroupStopped of `group`, pending or firing."""
    def match(alerts: Result) -> bool:
        return any(a["labels"].get("alertname") == "RocketMQGroupStopped"
                   and a["labels"].get("group") == group
                   and a["state"] in ("pending", "firing") for a in alerts)
    return match


async def test_prometheus_queries_a_group_left_behind_and_its_alert_goes_pending(
        metrics_lab: Lab, tmp_path: Path, prometheus: PrometheusLauncher) -> None:
    lab = metrics_lab
    await lab.group("g1", "T1")
    await lab.send("T1", 6, queue_id=0)
    await lab.commit("g1", "T1", 0, 1)  # then nobody online and no more commits: STOP
    collector = LagCollector(CollectorConfig((lab.ns,), "test", 300, tmp_path / "data",
                                             window=4, exporter=True, ledger_scope="test"))
    exporter = MetricsServer(lambda: collector.latest, "127.0.0.1", 0)
    exporter.start()
    assert lab.broker.metrics is not None
    try:
        await collector.start_collecting()
        server = await prometheus.start(
            [f"127.0.0.1:{lab.broker.metrics.port}"], job="rocketmq-broker",
            jobs={"rocketmq-lag": [f"127.0.0.1:{exporter.port}"]},
            rule_files=[quick_rules(tmp_path)], interval=INTERVAL)
        rules = await server.api("rules")
        loaded = {r["name"] for g in rules["groups"] for r in g["rules"]}
        assert {"RocketMQGroupStopped", "RocketMQLagAboveSLO"} <= loaded

        up = await server.wait_for("up", lambda r: sorted(values(r)) == [1.0, 1.0], TIMEOUT)
        assert {s["metric"]["job"] for s in up} == {"rocketmq-broker", "rocketmq-lag"}

        # The lag in messages, from the collector (rocketmq-exporter's name) and the broker.
        await server.wait_for('rocketmq_group_diff{group="g1",topic="T1"}',
                              lambda r: values(r) == [5.0], TIMEOUT)
        await server.wait_for(
            'sum(rocketmq_consumer_lag_messages{consumer_group="g1",topic="T1"})',
            lambda r: values(r) == [5.0], TIMEOUT)
        # The time lag: the oldest unconsumed message's age, ours in s, the exporter's in ms.
        [lag] = await server.wait_for('rocketmq_lag_seconds{group="g1"}',
                                      lambda r: len(r) == 1 and values(r)[0] > 0, TIMEOUT)
        assert lag["metric"]["cluster"] == "test"
        await server.wait_for('rocketmq_group_get_latency_by_storetime{group="g1",topic="T1"}',
                              lambda r: len(r) == 1 and values(r)[0] > 0, TIMEOUT)
        await server.wait_for('rocketmq_lag_verdict{group="g1",verdict="STOP"}',
                              lambda r: values(r) == [1.0], TIMEOUT)

        alerts = await server.wait_for_alerts(stopped("g1"), TIMEOUT)
        [alert] = [a for a in alerts if a["labels"]["alertname"] == "RocketMQGroupStopped"]
        assert alert["labels"]["severity"] == "critical"
        assert "mqadmin lag status -g g1" in alert["annotations"]["runbook"]

        # Every metric the shipped rules and dashboard query is in one of the live scrapes.
        check_served(served(await scrape_text(lab.metrics_url)),
                     served(await scrape_text(exporter.url)))
    finally:
        await collector.stop()
        exporter.stop()
