"""What deploy/ ships: the alert rules pass `promtool check rules`, each names a runbook
action, and every metric the rules and the Grafana dashboard query is served by the lag
collector or the broker (both scraped here, real ones); every broker name listed in
deploy/prometheus/broker-metrics.txt is in the broker's scrape with its type."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mqadmin.operations.lag.collector import CollectorConfig, LagCollector
from mqadmin.operations.lag.metrics import MetricsServer
from tests.lag.conftest import Lab

Served = dict[str, str]  # metric name as queries name it -> its family's type

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rocketmq-alerts.yml"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "rocketmq.json"
BROKER_METRICS = DEPLOY / "prometheus" / "broker-metrics.txt"
#: Prometheus's own series.
BUILTIN = {"up"}
_NAME = re.compile(r"\b(rocketmq_[a-z0-9_]+)\b")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def broker_metrics() -> dict[str, str]:
    """The broker's Apache names the deploy files may query: name -> type."""
    lines = [x.split() for x in BROKER_METRICS.read_text().splitlines()
             if x.strip() and not x.startswith("#")]
    return {name: kind for name, kind in lines}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def queries() -> list[str]:
    """Every PromQL text deploy/ holds: the rules' expressions and annotations (they may
    query too), the dashboard's targets and template variables."""
    found = [text for r in rules() for text in (r["expr"], *r["annotations"].values())]
    doc = json.loads(DASHBOARD.read_text())
    found += [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    found += [v["definition"] for v in doc["templating"]["list"]]
    return found


def queried() -> set[str]:
    """Every metric name deploy/ queries."""
    names: set[str] = set()
    for text in queries():
        names |= set(_NAME.findall(text)) | BUILTIN & set(re.findall(r"\b(up)\{", text))
    return names


def test_promtool_accepts_the_rules_and_the_scrape_config() -> None:
    tool = promtool()
    for args in (["check", "rules", str(RULES)], ["check", "config", str(PROMETHEUS)]):
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_runbook_naming_what_helps() -> None:
    alerts = {r["alert"]: r for r in rules()}
    wanted = {"RocketMQGroupStopped", "RocketMQGroupStalled", "RocketMQLagAboveSLO",
              "RocketMQRetentionRisk", "RocketMQDeadLettersGrowing", "RocketMQBrokerDown",
              "RocketMQMasterWithoutSlave", "RocketMQSlaveBehind", "RocketMQDiskNearlyFull"}
    assert wanted <= set(alerts)
    for name, r in alerts.items():
        runbook = r["annotations"]["runbook"]
        assert "mqadmin " in runbook or "dashboard" in runbook, name
        assert r["labels"]["severity"] in ("warning", "critical"), name


def test_dashboard_is_grafana_json_with_unique_panels() -> None:
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in doc["panels"] if p["type"] == "row"}
    assert {"Cluster", "Topics", "Dead letters", "Replication", "Storage"} <= titles
    assert all(t["expr"] for p in doc["panels"] for t in p.get("targets", []))


def served(text: str) -> Served:
    """The metric names a scrape holds as queries name them (a counter with `_total`, a
    histogram's `_bucket`, `_sum`, `_count` too), each with its family's type; families
    without samples count (the collector's are empty until the reads that fill them)."""
    found: Served = {}
    for f in text_string_to_metric_families(text):
        found[f.name + ("_total" if f.type == "counter" else "")] = f.type
        for sample in f.samples:
            found.setdefault(sample.name, f.type)
    return found


def check_served(broker: Served, collector: Served) -> None:
    """Every name of broker-metrics.txt is in the broker's scrape with its type, none in the
    collector's; every metric deploy/ queries is in one of the two."""
    listed = broker_metrics()
    wrong = {n: (kind, broker.get(n)) for n, kind in listed.items() if broker.get(n) != kind}
    assert not wrong, f"broker-metrics.txt (listed, served) differs from the broker: {wrong}"
    assert not set(collector) & set(listed), "a broker name is also the collector's"
    missing = queried() - set(collector) - set(broker) - BUILTIN
    assert not missing, f"deploy/ queries metrics nobody serves: {sorted(missing)}"


async def scrape_text(url: str) -> str:
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.get(url)
    resp.raise_for_status()
    return resp.text


async def served_text(lab: Lab, tmp_path: Path) -> str:
    """A real collector's /metrics after one cycle over a group with lag."""
    await lab.group("g1", "T1")
    await lab.send("T1", 3, queue_id=0)
    collector = LagCollector(CollectorConfig((lab.ns,), "test", 200, tmp_path / "data",
                                             exporter=True))
    server = MetricsServer(lambda: collector.latest, "127.0.0.1", 0)
    server.start()
    try:
        await collector.start_collecting()
        await collector.next_cycle()
        await collector.settle()
        async with httpx.AsyncClient(timeout=10) as client:
            return (await client.get(server.url)).text
    finally:
        await collector.stop()
        server.stop()


async def test_promtool_lints_the_collectors_exposition(lab: Lab, tmp_path: Path) -> None:
    tool = promtool()
    text = await served_text(lab, tmp_path)
    done = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    problems = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    # rocketmq-exporter's label names (countOfOnlineConsumers, brokerIP...) are kept as
    # they are, so its dashboards work: the only complaint allowed.
    assert all("label names should be written in 'snake_case'" in x for x in problems), problems


async def test_every_queried_metric_exists(metrics_lab: Lab, tmp_path: Path) -> None:
    collector = served(await served_text(metrics_lab, tmp_path))
    broker = served(await scrape_text(metrics_lab.metrics_url))
    check_served(broker, collector)
    assert {"rocketmq_group_diff", "rocketmq_lag_verdict",
            "rocketmq_storage_size_bytes"} <= queried()
