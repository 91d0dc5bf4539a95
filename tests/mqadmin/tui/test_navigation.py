"""The dashboard against an in-process cluster: every screen by key and by `:`, the key
list, filter and sort keeping the cursor, read-only mode, an unreachable cluster."""

from __future__ import annotations

from textual.widgets import Input

from mqadmin import history
from mqadmin.tui.screens.access import AccessScreen
from mqadmin.tui.screens.audit import AuditScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.cleanup import CleanupScreen
from mqadmin.tui.screens.cluster import ClusterScreen
from mqadmin.tui.screens.dlq import DlqScreen
from mqadmin.tui.screens.groups import GroupScreen, GroupsScreen
from mqadmin.tui.screens.message_search import MessageSearchScreen
from mqadmin.tui.screens.producers import ProducersScreen
from mqadmin.tui.screens.replication import ReplicationScreen
from mqadmin.tui.screens.topics import TopicScreen, TopicsScreen
from mqadmin.tui.widgets.dialogs import CommandLine, KeyList
from tests.conftest import closed_port_addr
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.tui.pilot import (
    SIZE,
    dashboard,
    keys_of,
    loaded,
    screen,
    table,
    type_text,
    until,
)

SCREEN_KEYS = [("1", ClusterScreen), ("2", TopicsScreen), ("3", GroupsScreen),
               ("4", DlqScreen), ("5", ReplicationScreen), ("6", CleanupScreen),
               ("7", AuditScreen), ("8", AccessScreen), ("9", MessageSearchScreen),
               ("0", ProducersScreen)]


async def test_every_screen_by_key_and_by_command(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders")
    cluster.send("Orders", b"one")
    cluster.commit("billing", "Orders", 0, 0)
    app = dashboard(cluster.ns)
    async with app.run_test(size=SIZE) as pilot:
        shown = await loaded(pilot, ClusterScreen)
        assert keys_of(pilot) == [cluster.broker_addr]
        await until(pilot, lambda: "brokers 1/1 up" in str(app.health), what="the header")
        for key, kind in SCREEN_KEYS:
            await pilot.press(key)
            await loaded(pilot, kind)
        # the header's second line comes a second after its first (the screen reads first):
        # checked once the screens above are shown, not waited for
        await until(pilot, lambda: "unhandled dead letters 0" in str(app.health),
                    what="the header's dead letters")
        for word, kind in [("topics", TopicsScreen), ("cg", GroupsScreen),
                           ("ha", ReplicationScreen), ("cleanup", CleanupScreen),
                           ("audit", AuditScreen), ("dlq", DlqScreen),
                           ("msg", MessageSearchScreen), ("producers", ProducersScreen),
                           ("acl", AccessScreen), ("cluster", ClusterScreen)]:
            await pilot.press("colon")
            assert isinstance(app.screen, CommandLine)
            await type_text(pilot, word)
            await pilot.press("enter")
            await loaded(pilot, kind)
        await pilot.press("colon")
        await type_text(pilot, "nonsense")
        await pilot.press("enter")
        assert isinstance(app.screen, ClusterScreen)  # an unknown command only says so
        await pilot.press("question_mark")
        assert isinstance(app.screen, KeyList)
        await pilot.press("escape")
        assert app.screen is shown
        await pilot.press("escape")  # back to the screen shown before
        await loaded(pilot, AccessScreen)


async def test_drill_down_into_a_topic_and_a_group_and_back(
        cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=2)
    for i in range(3):
        cluster.send("Orders", b"m%d" % i)
    cluster.commit("billing", "Orders", 0, 1)
    cluster.consumer_online("billing", ("Orders",))
    app = dashboard(cluster.ns, start="topics")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, TopicsScreen)
        topics = table(pilot)
        topics.move_cursor(row=keys_of(pilot).index("Orders"))
        await pilot.press("enter")
        await loaded(pilot, TopicScreen)
        assert keys_of(pilot, "#queues") == ["broker-a/0", "broker-a/1"]
        assert keys_of(pilot, "#topic-groups") == ["billing"]
        assert table(pilot, "#topic-groups").shown_rows()[0]["lag"] == 2
        await pilot.press("escape")
        await loaded(pilot, TopicsScreen)
        await pilot.press("3")
        await loaded(pilot, GroupsScreen)
        row = table(pilot).row_by_key("billing")
        assert row is not None and row["lag"] == 2 and row["state"] == "ONLINE"
        # the lag monitor's verdict (a quick sampling: no collector runs here; a stuck
        # offset over the sampling's half second is too short to judge)
        assert row["verdict"] in ("OK", "WARNING", "ERROR", "UNKNOWN") and row["rule"] is not None
        assert len(row["history"]) == 2
        table(pilot).move_cursor(row=keys_of(pilot).index("billing"))
        await pilot.press("enter")
        await loaded(pilot, GroupScreen)
        queues = {k: r for k in keys_of(pilot, "#queues")
                  if (r := table(pilot, "#queues").row_by_key(k))}
        assert queues["Orders/broker-a/0"]["diff"] == 2
        assert queues["Orders/broker-a/0"]["lagMs"] is not None
        assert keys_of(pilot, "#clients") == ["127.0.0.1@test"]


async def test_filter_and_sort_keep_the_cursor_on_the_same_row(
        cluster: BackgroundCluster) -> None:
    for name in ("Alpha", "Beta", "Gamma", "AlphaTwo"):
        cluster.create_topic(name, queues=1)
    app = dashboard(cluster.ns, start="topics")
    async with app.run_test(size=SIZE) as pilot:
        current = await loaded(pilot, TopicsScreen)
        await pilot.press("slash")
        await type_text(pilot, "alpha")
        assert keys_of(pilot) == ["Alpha", "AlphaTwo"]
        await pilot.press("enter")  # keeps the filter, back to the table
        assert keys_of(pilot) == ["Alpha", "AlphaTwo"]
        await pilot.press("down")
        assert table(pilot).selected_key == "AlphaTwo"
        loads = current.loads
        await pilot.press("ctrl+r")
        await until(pilot, lambda: current.loads > loads, what="a refresh")
        assert table(pilot).selected_key == "AlphaTwo"
        await pilot.press("S")  # reverse: the cursor follows its row
        assert keys_of(pilot) == ["AlphaTwo", "Alpha"]
        assert table(pilot).selected_key == "AlphaTwo"
        await pilot.press("escape")  # clears the filter
        assert {"Alpha", "Beta", "Gamma", "AlphaTwo"} <= set(keys_of(pilot))
        assert not app.screen.query_one("#filter", Input).value
        assert table(pilot).selected_key == "AlphaTwo"


async def test_read_only_mode_refuses_every_change(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.commit("billing", "Orders", 0, 0)
    app = dashboard(cluster.ns, readonly=True, start="topics")
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (said.append(message), notify(message, **kw))[1]  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, TopicsScreen)
        assert "READ-ONLY" in str(app.screen.query_one("StatusHeader").render())
        for key in ("c", "e", "d"):
            await pilot.press(key)
            assert isinstance(app.screen, TopicsScreen)
        for key, kind, action in [("3", GroupsScreen, "r"), ("5", ReplicationScreen, "w"),
                                  ("5", ReplicationScreen, "f"), ("6", CleanupScreen, "x")]:
            await pilot.press(key)
            await loaded(pilot, kind)
            await pilot.press(action)
            assert not isinstance(app.screen, ChangeScreen)
            assert isinstance(app.screen, kind)
        assert len([m for m in said if m.startswith("read-only mode")]) == 7
        assert history.records() == []


async def test_an_unreachable_cluster_is_a_banner_and_the_screens_stay_usable() -> None:
    app = dashboard(closed_port_addr(), start="topics")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.screen.query_one("#banner").has_class("shown"),
                    what="the banner")
        banner = str(app.screen.query_one("#banner").render())
        assert "name server is running" in banner and "Retrying in 10 s" in banner
        await until(pilot, lambda: "unreachable" in str(app.health), what="the header")
        await pilot.press("1")
        assert isinstance(screen(pilot), ClusterScreen)
        await pilot.press("q")
    assert app.return_code in (0, None)
