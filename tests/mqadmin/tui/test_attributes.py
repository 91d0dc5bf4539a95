"""RocketMQ 5 attributes in the dashboard, on a live cluster: the Topics screen shows each
topic's message type, its form creates a FIFO topic and changes the type (through the change
runner, as updateTopic -a), and a group's screen shows consumeMessageOrderly."""

from __future__ import annotations

from textual.widgets import Select, Static

from mqadmin import history
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.groups import GroupScreen, GroupsScreen
from mqadmin.tui.screens.topic_form import TopicForm
from mqadmin.tui.screens.topics import TopicScreen, TopicsScreen
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, keys_of, loaded, table, type_text, until
from tests.mqadmin.tui.test_changes import broker_topic, finish


async def test_create_a_fifo_topic_and_change_its_type_through_the_form(
        cluster: BackgroundCluster) -> None:
    app = dashboard(cluster.ns, start="topics")
    async with app.run_test(size=SIZE) as pilot:
        current = await loaded(pilot, TopicsScreen)
        await pilot.press("c")
        assert isinstance(app.screen, TopicForm)
        await type_text(pilot, "FifoOrders")
        app.screen.query_one("#type", Select).value = "FIFO"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChangeScreen), what="the dialog")
        dialog = await finish(pilot)
        assert dialog.state == "done" and dialog.outcome is not None
        assert dialog.outcome.rows[0]["after"].endswith("attrs=message.type=FIFO")
        created = broker_topic(cluster, "FifoOrders")
        assert created is not None and created.message_type == "FIFO"
        await pilot.press("escape")

        loads = current.loads
        await pilot.press("ctrl+r")  # a refresh now, not at the screen's next interval
        await until(pilot, lambda: current.loads > loads, what="a refresh")
        rows = {r["topic"]: r for r in table(pilot).shown_rows()}
        assert rows["FifoOrders"]["type"] == "FIFO"
        table(pilot).move_cursor(row=keys_of(pilot).index("FifoOrders"))
        await pilot.press("e")
        assert isinstance(app.screen, TopicForm)
        assert app.screen.query_one("#type", Select).value == "FIFO"  # the current type
        app.screen.query_one("#type", Select).value = "DELAY"
        await pilot.press("enter")
        dialog = await finish(pilot)
        assert dialog.state == "done"
        changed = broker_topic(cluster, "FifoOrders")
        assert changed is not None and changed.attributes == {"message.type": "DELAY"}
        await pilot.press("escape")
        await loaded(pilot, TopicsScreen)
        table(pilot).move_cursor(row=keys_of(pilot).index("FifoOrders"))
        await pilot.press("enter")
        detail = await loaded(pilot, TopicScreen)
        assert str(detail.query_one("#topic-attributes", Static).render()) == (
            "message type DELAY (message.type=DELAY)")

    audited = history.records(detail=True)
    assert [r["args"].get("attributes") for r in audited] == [
        "+message.type=FIFO", "+message.type=DELAY"]


async def test_group_screen_shows_consume_message_orderly(cluster: BackgroundCluster) -> None:
    cluster.create_group("FifoGroup", consume_message_orderly=True)
    cluster.create_topic("Plain")
    cluster.send("Plain", b"m")
    cluster.commit("FifoGroup", "Plain", 0, 0)
    cluster.consumer_online("FifoGroup", ("Plain",))
    app = dashboard(cluster.ns, start="groups")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, GroupsScreen)
        table(pilot).move_cursor(row=keys_of(pilot).index("FifoGroup"))
        await pilot.press("enter")
        shown = await loaded(pilot, GroupScreen)
        text = str(shown.query_one("#group-settings", Static).render())
        assert "consumeMessageOrderly=true" in text and "retryMaxTimes=16" in text


async def test_group_screen_keeps_the_total_row_last_whatever_the_sort(
        cluster: BackgroundCluster) -> None:
    cluster.create_group("TotalGroup")
    cluster.create_topic("Totals", queues=2)
    for queue_id in (0, 1):
        cluster.send("Totals", b"m", queue_id=queue_id)
    cluster.commit("TotalGroup", "Totals", 0, 0)
    cluster.commit("TotalGroup", "Totals", 1, 1)
    cluster.consumer_online("TotalGroup", ("Totals",))
    app = dashboard(cluster.ns, start="groups")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, GroupsScreen)
        table(pilot).move_cursor(row=keys_of(pilot).index("TotalGroup"))
        await pilot.press("enter")
        await loaded(pilot, GroupScreen)
        queues = table(pilot, "#queues")
        for press in ("", *"ssssSsS"):  # every column, both directions
            if press:
                queues.focus()
                await pilot.press(press)
            topics = [r["topic"] for r in queues.shown_rows()]
            assert topics == ["Totals", "Totals", "(total)"], (queues.sort_label, topics)
