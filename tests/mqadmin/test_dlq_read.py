"""dlq list / show / --summary against an in-process cluster, on DLQs of perm 6 and perm 2."""

from __future__ import annotations

import time

import pytest

from engine.protocol.perm import PERM_RW, PERM_WRITE
from tests.mqadmin.cli import invoke, json_rows
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import bury, setup_group


@pytest.mark.parametrize("perm", [PERM_RW, PERM_WRITE])
def test_list_and_show(cluster: BackgroundCluster, perm: int) -> None:
    setup_group(cluster, "g1", "Orders", dlq_perm=perm)
    ids = bury(cluster, "g1", "Orders", 5)
    rows = json_rows("dlq", "list", "-n", cluster.ns)
    assert [(r["group"], r["deadLetters"], r["unhandled"], r["lastHour"]) for r in rows] == [
        ("g1", 5, 5, 5)]
    assert rows[0]["topTopics"] == "Orders (5)"
    shown = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1")
    assert [r["originMsgId"] for r in shown] == ids
    assert {r["originTopic"] for r in shown} == {"Orders"}
    assert shown[0]["keys"] == "order-0" and shown[0]["triage"] == "unhandled"
    assert shown[0]["body"] == '{"order": 0, "reason": "bad-price"}'
    tagged = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--tag", "TagB")
    assert [r["keys"] for r in tagged] == ["order-1", "order-3"]
    summary = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--summary", "topic,tag")
    assert [(r["value"], r["count"]) for r in summary] == [("Orders / TagA", 3),
                                                           ("Orders / TagB", 2)]
    by_field = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--summary",
                         "field:reason")
    assert [(r["value"], r["count"]) for r in by_field] == [("bad-price", 3), ("timeout", 2)]


def test_show_errors(cluster: BackgroundCluster) -> None:
    result = invoke("dlq", "show", "-n", cluster.ns, "-g", "nobody")
    assert result.exit_code == 3
    assert "dlq list" in result.stderr
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 1)
    result = invoke("dlq", "show", "-n", cluster.ns, "-g", "g1", "--summary", "color")
    assert result.exit_code == 2
    assert "key-prefix" in result.stderr


def test_show_between_store_times(cluster: BackgroundCluster) -> None:
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 2)
    time.sleep(0.01)  # two store times a few milliseconds apart
    split = str(int(time.time() * 1000))
    time.sleep(0.01)
    bury(cluster, "g1", "Orders", 2, start=2)
    later = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--since", split)
    earlier = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--until", split)
    assert [r["keys"] for r in earlier] == ["order-0", "order-1"]
    assert [r["keys"] for r in later] == ["order-2", "order-3"]
    limited = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--limit", "3")
    assert len(limited) == 3
