"""Changes through the dashboard: the plan is shown, nothing changes before `y`, the change
is verified and audited as the CLI's; topics, offsets and cleanup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Input

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.topic import TopicConfig
from mqadmin import history
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.cleanup import CleanupScreen
from mqadmin.tui.screens.groups import GroupsScreen
from mqadmin.tui.screens.reset_form import ResetForm
from mqadmin.tui.screens.topic_form import TopicForm
from mqadmin.tui.screens.topics import TopicsScreen
from tests.lag.test_cleanup_loss import EVERY_HOUR, fill, queue_min
from tests.mqadmin.conftest import BackgroundCluster, start_cluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, keys_of, loaded, table, type_text, until


def broker_topic(cluster: BackgroundCluster, topic: str) -> TopicConfig | None:
    async def read(admin: MQAdmin) -> TopicConfig | None:
        configs = await admin.broker.all_topic_config(cluster.broker_addr)
        return configs.topic_config_table.get(topic)
    return cluster.admin_call(read)  # type: ignore[no-any-return]


async def finish(pilot: Any, *, accept: bool = False) -> ChangeScreen:
    """Wait for the plan, apply it (accepting a risk first), wait for the outcome."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ChangeScreen)
                and app.screen.state != "planning", what="the plan")
    dialog = app.screen
    assert isinstance(dialog, ChangeScreen)
    assert dialog.state == "planned", dialog.query_one("#change-status").render()
    if accept:
        await pilot.press("A")
    await pilot.press("y")
    await until(pilot, lambda: dialog.state in ("done", "failed"), timeout=60,
                what="the outcome")
    return dialog


async def test_create_update_and_delete_a_topic_through_the_form(
        cluster: BackgroundCluster) -> None:
    app = dashboard(cluster.ns, start="topics")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, TopicsScreen)
        await pilot.press("c")
        assert isinstance(app.screen, TopicForm)
        await type_text(pilot, "bad topic")
        await pilot.press("enter")
        assert "invalid topic name" in str(app.screen.query_one("#form-error").render())
        name = app.screen.query_one("#name", Input)
        name.value = "NewOrders"
        app.screen.query_one("#read", Input).value = "3"
        app.screen.query_one("#write", Input).value = "3"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChangeScreen), what="the dialog")
        await until(pilot, lambda: app.screen.state == "planned", what="the plan")
        assert broker_topic(cluster, "NewOrders") is None  # planning changes nothing
        plan = app.screen.plan_view
        assert plan is not None and plan.rows[0]["before"] == "(absent)"
        dialog = await finish(pilot)
        assert dialog.state == "done" and dialog.outcome is not None
        assert dialog.outcome.rows[0]["verified"] is True
        created = broker_topic(cluster, "NewOrders")
        assert created is not None and created.write_queue_nums == 3
        await pilot.press("escape")
        current = await loaded(pilot, TopicsScreen)
        await until(pilot, lambda: "NewOrders" in keys_of(pilot), what="the new topic")

        table(pilot).move_cursor(row=keys_of(pilot).index("NewOrders"))
        await pilot.press("e")
        assert isinstance(app.screen, TopicForm)
        assert app.screen.query_one("#write", Input).value == "3"
        app.screen.query_one("#write", Input).value = "5"
        app.screen.query_one("#read", Input).value = "5"
        await pilot.press("enter")
        dialog = await finish(pilot)
        assert dialog.state == "done"
        assert broker_topic(cluster, "NewOrders").write_queue_nums == 5  # type: ignore[union-attr]
        await pilot.press("escape")

        loads = current.loads
        await pilot.press("ctrl+r")  # a refresh now, not at the screen's next interval
        await until(pilot, lambda: current.loads > loads, what="a refresh")
        table(pilot).move_cursor(row=keys_of(pilot).index("NewOrders"))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ChangeScreen)
                    and app.screen.state == "planned", what="the plan")
        await pilot.press("n")  # cancelled: nothing changes
        assert isinstance(app.screen, TopicsScreen)
        assert broker_topic(cluster, "NewOrders") is not None
        await pilot.press("d")
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
        assert broker_topic(cluster, "NewOrders") is None
        await pilot.press("escape")
        await until(pilot, lambda: "NewOrders" not in keys_of(pilot), what="the topic gone")

    audited = history.records(detail=True)
    assert [r["command"] for r in audited] == ["updateTopic", "updateTopic", "deleteTopic"]
    assert all(r["outcome"] == "applied" and r["args"]["via"] == "dashboard" for r in audited)
    assert audited[0]["plan"][0]["before"] == "(absent)"


async def test_reset_offsets_with_a_plan(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.create_group("billing")
    for i in range(4):
        cluster.send("Orders", b"m%d" % i)
    cluster.commit("billing", "Orders", 0, 1)
    app = dashboard(cluster.ns, start="groups")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, GroupsScreen)
        await until(pilot, lambda: "billing" in keys_of(pilot), what="the group")
        assert table(pilot).row_by_key("billing")["lag"] == 3  # type: ignore[index]
        table(pilot).move_cursor(row=keys_of(pilot).index("billing"))
        await pilot.press("r")
        assert isinstance(app.screen, ResetForm)
        await pilot.press("enter")  # "now": to the end of the queue
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
        await pilot.press("escape")
        await until(pilot, lambda: table(pilot).row_by_key("billing")["lag"] == 0,  # type: ignore[index]
                    what="the lag gone")
    assert [r["command"] for r in history.records()] == ["resetOffsetByTime"]


async def test_cleanup_plans_and_runs(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.send("Orders", b"x")
    app = dashboard(cluster.ns, start="cleanup")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, CleanupScreen)
        assert table(pilot).shown_rows()[0]["deleted"] is False
        await pilot.press("x")
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
        assert "nothing expired" in dialog.plan_view.rows[0]["after"]  # type: ignore[union-attr]
    assert [r["command"] for r in history.records()] == ["deleteExpiredCommitLog"]


async def test_cleanup_that_loses_messages_needs_an_explicit_acceptance(
        tmp_path: Path) -> None:
    expiring = start_cluster(tmp_path, file_reserved_time=0, delete_when=EVERY_HOUR,
                             clean_resource_interval=3_600_000)
    try:
        fill(expiring)
        app = dashboard(expiring.ns, start="cleanup")
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot, CleanupScreen)
            doomed = [r for r in table(pilot).shown_rows() if r["deleted"]]
            assert doomed and doomed[0]["unconsumed"] > 0
            assert "laggard" in doomed[0]["losses"]
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ChangeScreen)
                        and app.screen.state == "planned", what="the plan")
            dialog = app.screen
            assert dialog.plan_view is not None and "laggard" in dialog.plan_view.risk
            await pilot.press("y")  # refused until the loss is accepted
            assert dialog.state == "planned"
            assert queue_min(expiring, "Bulk") == 0
            await pilot.press("A", "y")
            await until(pilot, lambda: dialog.state in ("done", "failed"), timeout=60,
                        what="the outcome")
            assert dialog.state == "done", dialog.outcome
        assert queue_min(expiring, "Bulk") > 0
        record = history.records(detail=True)[-1]
        assert record["command"] == "deleteExpiredCommitLog"
        assert record["args"]["accept_loss"] is True
    finally:
        expiring.stop()
