"""``mqadmin lag status`` over several clusters (``--context`` repeated, ``--all-contexts``)
through the real CLI, against two in-process clusters and one that does not answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.exit_codes import ExitCode
from tests.conftest import closed_port_addr
from tests.lag.test_cli import lagging_group
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, two_clusters

#: What status reads and shows, not rates over time: quick sampling 50 ms apart.
pytestmark = pytest.mark.usefixtures("quick_sampling")


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[BackgroundCluster, BackgroundCluster]]:
    with two_clusters(tmp_path) as both:
        yield both


def add_context(name: str, ns: str) -> None:
    added = invoke("context", "add", name, "-n", ns)
    assert added.exit_code == 0, added.stderr


def test_all_contexts_gives_every_cluster_its_rows(
        two: tuple[BackgroundCluster, BackgroundCluster]) -> None:
    east, west = two
    lagging_group(east)  # laggard: 3 behind on east; west has no group
    west.create_topic("%RETRY%payments", queues=1)
    west.create_topic("Payments", queues=1)
    west.send("Payments", queue_id=0)
    west.commit("payments", "Payments", 0, 1)  # caught up
    west.call(west.broker.registration.register_all())  # type: ignore[union-attr]
    add_context("east", east.ns)
    add_context("west", west.ns)

    result = invoke("lag", "status", "--all-contexts", "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["cluster"], r["group"], r["lag"]) for r in rows] == [
        ("east", "laggard", 3), ("west", "payments", 0)]
    assert "east: 1 group(s) from the quick sampling" in result.stderr
    assert "west: 1 group(s)" in result.stderr

    only = invoke("lag", "status", "--context", "west", "--context", "east", "--queues",
                  "-g", "laggard", "-o", "json")
    assert only.exit_code == 0, only.stderr
    assert {(r["cluster"], r["queueId"]) for r in json.loads(only.stdout)} == {
        ("east", 0), ("east", 1)}


def test_a_cluster_that_does_not_answer_is_named_and_the_others_shown(
        two: tuple[BackgroundCluster, BackgroundCluster]) -> None:
    east, _ = two
    lagging_group(east)
    add_context("east", east.ns)
    add_context("gone", closed_port_addr())
    result = invoke("lag", "status", "--all-contexts", "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL, result.stderr
    assert [r["cluster"] for r in json.loads(result.stdout)] == ["east"]
    assert "failed on 1 of 2 clusters: gone:" in result.stderr


def test_all_contexts_needs_saved_contexts_and_no_other_choice(
        two: tuple[BackgroundCluster, BackgroundCluster]) -> None:
    none = invoke("lag", "status", "--all-contexts")
    assert none.exit_code == ExitCode.USAGE and "mqadmin context add" in none.stderr
    add_context("east", two[0].ns)
    both = invoke("lag", "status", "--all-contexts", "--context", "east")
    assert both.exit_code == ExitCode.USAGE and "leave out -n and --context" in both.stderr
