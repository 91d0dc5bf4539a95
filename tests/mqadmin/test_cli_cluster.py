"""Cluster and broker commands through CliRunner against a live cluster, ``-o json`` parsed."""

from __future__ import annotations

import json

from mqadmin import history
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of, rows_of_any
from .conftest import BackgroundCluster


def test_cluster_list_more_stats(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Traffic", queues=1)
    cluster.send("Traffic")
    [row] = json_rows("clusterList", "-m", "-n", cluster.ns)
    assert set(row) == {"cluster", "brokerName", "brokerId", "addr", "inTotalYest",
                        "outTotalYest", "inTotalToday", "outTotalToday"}
    assert row["inTotalToday"] >= 1


def test_cluster_list_filters_a_cluster_and_repeats(cluster: BackgroundCluster) -> None:
    assert json_rows("clusterList", "-c", "NoSuchCluster", "-n", cluster.ns) == []
    result = invoke("clusterList", "-i", "1", "--rounds", "2", "-n", cluster.ns, "-o", "csv")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and lines[0] == lines[2] and lines[0].startswith("cluster,")


def test_broker_status(cluster: BackgroundCluster) -> None:
    rows = json_rows("brokerStatus", "-b", cluster.broker_addr, "-n", cluster.ns)
    values = {r["key"]: r["value"] for r in rows}
    assert values["brokerVersionDesc"].startswith("V") and "commitLogMaxOffset" in values
    assert {r["brokerName"] for r in rows} == {"broker-a"}
    assert [r["key"] for r in rows] == sorted(values)
    by_cluster = json_rows("brokerStatus", "-c", "DefaultCluster", "-n", cluster.ns)
    assert {r["addr"] for r in by_cluster} == {cluster.broker_addr}
    neither = invoke("brokerStatus", "-n", cluster.ns)
    assert neither.exit_code == ExitCode.USAGE and "-b" in neither.stderr


def test_get_broker_config(cluster: BackgroundCluster) -> None:
    rows = json_rows("getBrokerConfig", "-b", cluster.broker_addr, "-n", cluster.ns)
    values = {r["key"]: r["value"] for r in rows}
    assert values["brokerName"] == "broker-a"
    assert {r["addr"] for r in rows} == {cluster.broker_addr}


def test_update_broker_config(cluster: BackgroundCluster) -> None:
    result = invoke("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "fileReservedTime",
                    "-v", "24", "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["broker"], row["before"], row["after"], row["verified"]) == (
        cluster.broker_addr, "72", "24", True)
    values = {r["key"]: r["value"] for r in json_rows(
        "getBrokerConfig", "-c", "DefaultCluster", "-n", cluster.ns)}
    assert values["fileReservedTime"] == "24"


def test_rejected_broker_config_change_exits_4(cluster: BackgroundCluster) -> None:
    result = invoke("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "brokerName",
                    "-v", "other", "-n", cluster.ns, "--yes")
    assert result.exit_code == ExitCode.REJECTED
    assert "NO_PERMISSION" in result.stderr and "Traceback" not in result.output
    assert history.records()[0]["outcome"] == "failed"


def test_broker_config_change_that_does_not_show_exits_1(cluster: BackgroundCluster) -> None:
    result = invoke("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "noSuchSetting",
                    "-v", "1", "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == ExitCode.ERROR
    assert rows_of_any(result)[0]["verified"] is False
    assert history.records()[0]["outcome"] == "unverified"


def test_broker_consume_stats(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Lagging", queues=2)
    for _ in range(5):
        cluster.send("Lagging", queue_id=0)
    cluster.send("Lagging", queue_id=1)
    cluster.create_group("LagGroup")
    cluster.commit("LagGroup", "Lagging", 0, 2)
    cluster.commit("LagGroup", "Lagging", 1, 1)
    result = invoke("brokerConsumeStats", "-b", cluster.broker_addr, "-n", cluster.ns,
                    "--output", "json")
    assert result.exit_code == 0, result.stderr
    rows = [r for r in rows_of(result) if r["group"] == "LagGroup"]
    assert [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"])
            for r in rows] == [(0, 5, 2, 3), (1, 1, 1, 0)]
    assert "Diff Total" in result.stderr
    high = invoke("brokerConsumeStats", "-b", cluster.broker_addr, "-l", "1", "-o", "false",
                  "-n", cluster.ns, "--output", "json")
    assert [r["queueId"] for r in rows_of(high) if r["group"] == "LagGroup"] == [0]


def test_stats_all(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Counted", queues=1)
    for _ in range(4):
        cluster.send("Counted")
    cluster.commit("CountGroup", "Counted", 0, 1)
    rows = json_rows("statsAll", "-t", "Counted", "-n", cluster.ns)
    assert rows == [{"topic": "Counted", "group": "CountGroup", "accumulation": 3,
                     "inTPS": rows[0]["inTPS"], "outTPS": 0.0, "inMsg24Hour": 4,
                     "outMsg24Hour": 0}]
    everything = json_rows("statsAll", "-n", cluster.ns)
    assert "Counted" in {r["topic"] for r in everything}
    assert not any(r["topic"].startswith("%") for r in everything)
    active = {r["topic"] for r in json_rows("statsAll", "-a", "-n", cluster.ns)}
    assert "Counted" in active and "TBW102" not in active


def test_cluster_rt(cluster: BackgroundCluster) -> None:
    [row] = json_rows("clusterRT", "-a", "3", "-s", "16", "-n", cluster.ns)
    assert (row["cluster"], row["brokerName"], row["successCount"], row["failCount"]) == (
        "DefaultCluster", "broker-a", 3, 0)
    assert row["rtMs"] >= 0
    [logged] = json_rows("clusterRT", "-a", "2", "-p", "true", "-m", "room1", "-n", cluster.ns)
    assert logged["machineRoom"] == "room1" and logged["time"]


def test_json_of_every_read_is_one_document(cluster: BackgroundCluster) -> None:
    result = invoke("clusterList", "-n", cluster.ns, "-o", "json")
    assert isinstance(json.loads(result.stdout), list)


def test_ha_status_takes_a_broker_name_or_an_address(cluster: BackgroundCluster) -> None:
    by_name = json_rows("haStatus", "-b", "broker-a", "-n", cluster.ns)
    by_addr = json_rows("haStatus", "-b", cluster.broker_addr, "-n", cluster.ns)  # Apache 5's
    assert [r["addr"] for r in by_addr] == [cluster.broker_addr]
    assert [r["role"] for r in by_addr] == [r["role"] for r in by_name] == ["ASYNC_MASTER"]
    unknown = invoke("haStatus", "-b", "127.0.0.1:1", "-n", cluster.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "neither a registered broker name (known: broker-a)" in unknown.stderr
