"""The fleet view against two in-process clusters and one that does not answer: a row per
cluster with its health, Enter opening that cluster's screens (the header names it, no
screen keeps the other cluster's rows), Esc back to the fleet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.config import resolve
from mqadmin.tui.app import Dashboard
from mqadmin.tui.screens.cluster import ClusterScreen
from mqadmin.tui.screens.fleet import FleetScreen
from mqadmin.tui.screens.topics import TopicsScreen
from tests.conftest import closed_port_addr
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, two_clusters
from tests.mqadmin.tui.pilot import SIZE, keys_of, loaded, table, until


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[BackgroundCluster, BackgroundCluster]]:
    with two_clusters(tmp_path) as both:
        yield both


def fleet_app(*names: str) -> Dashboard:
    endpoints = [resolve(None, n) for n in names]
    return Dashboard(endpoints[0], fleet=endpoints)


async def test_fleet_rows_and_enter_opens_the_cluster(
        two: tuple[BackgroundCluster, BackgroundCluster]) -> None:
    east, west = two
    east.create_topic("EastOrders")
    west.create_topic("WestPayments")
    west.create_topic("%DLQ%billing", queues=1)
    west.send("%DLQ%billing", b"dead")
    for name, ns in (("east", east.ns), ("west", west.ns), ("gone", closed_port_addr())):
        assert invoke("context", "add", name, "-n", ns).exit_code == 0
    app = fleet_app("east", "west", "gone")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, FleetScreen)
        await until(pilot, lambda: len(table(pilot).all_rows) == 3, what="three rows")
        assert "fleet of 3 clusters: east, west, gone" in app.where
        rows = {r["cluster"]: r for r in table(pilot).all_rows}
        assert keys_of(pilot) == ["east", "gone", "west"]  # sorted by cluster
        for name in ("east", "west"):
            row = rows[name]
            assert (row["state"], row["namesrvUp"], row["brokersUp"]) == ("UP", "1/1", "1/1")
            assert (row["lonelyMasters"], row["lonely"]) == (1, "broker-a")
            assert row["inError"] is None and row["disk"] is not None  # no collector runs
        assert (rows["east"]["deadLetters"], rows["west"]["deadLetters"]) == (0, 1)
        assert rows["gone"]["state"] == "DOWN" and rows["gone"]["error"]

        await pilot.press("down", "down", "enter")  # west
        shown = await loaded(pilot, ClusterScreen)
        assert "context west" in app.where and west.ns in app.where
        assert keys_of(pilot) == [west.broker_addr]
        await until(pilot, lambda: "brokers 1/1 up" in str(app.health), what="west's health")
        await pilot.press("2")
        await loaded(pilot, TopicsScreen)
        await until(pilot, lambda: "WestPayments" in keys_of(pilot), what="west's topics")
        assert "EastOrders" not in keys_of(pilot)

        await pilot.press("escape", "escape")  # topics -> cluster -> the fleet
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), what="the fleet")
        assert "fleet of 3 clusters" in app.where
        await pilot.press("up", "up", "enter")  # east
        await until(pilot, lambda: app.screen is not shown
                    and isinstance(app.screen, ClusterScreen), what="east's cluster screen")
        await loaded(pilot, ClusterScreen)
        assert "context east" in app.where
        assert keys_of(pilot) == [east.broker_addr]
        await pilot.press("2")  # started afresh: west's topics are not shown, not even first
        topics = await loaded(pilot, TopicsScreen)
        assert topics.loads >= 1
        assert "EastOrders" in keys_of(pilot) and "WestPayments" not in keys_of(pilot)
