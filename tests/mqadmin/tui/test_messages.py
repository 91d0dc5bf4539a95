"""The Messages screen against an in-process cluster: a topic over a time range newest first
and in pages; by key and by either id into the detail (body, properties, hex); export; resend
to a group and consume directly through the change dialog, audited; the Producers screen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Input

from engine.client.admin import MQAdmin
from engine.client.results import SendResult
from mqadmin import history
from mqadmin.operations.messages.ids import find_by_id
from mqadmin.tui.screens.message_detail import MessageDetailScreen
from mqadmin.tui.screens.message_search import MessageSearchScreen
from mqadmin.tui.screens.producers import ProducerForm, ProducersScreen
from mqadmin.tui.screens.search_form import SearchForm
from mqadmin.tui.widgets.dialogs import Pick, Prompt
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import setup_group
from tests.mqadmin.trace_helpers import TOPIC, send_and_consume
from tests.mqadmin.tui.pilot import SIZE, dashboard, loaded, table, type_text, until
from tests.mqadmin.tui.test_changes import finish


def store_order(cluster: BackgroundCluster, sent: list[SendResult]
                ) -> dict[str, tuple[int, int]]:
    """Each sent message's store time (ms) and commit-log offset by its offset message id,
    read back: newest first is the descending order of these."""
    async def read(admin: MQAdmin) -> dict[str, tuple[int, int]]:
        records = [(await find_by_id(admin, s.offset_msg_id))[0].record for s in sent]
        return {r.offset_msg_id: (r.store_timestamp, r.physical_offset) for r in records}
    return cluster.admin_call(read)  # type: ignore[no-any-return]


def text_of(screen: object, selector: str) -> str:
    return str(screen.query_one(selector).render())  # type: ignore[attr-defined]


async def fill(pilot: object, **values: str) -> None:
    """Set the search form's fields (replacing what it remembered)."""
    form = pilot.app.screen  # type: ignore[attr-defined]
    assert isinstance(form, SearchForm | ProducerForm), form
    for name, value in values.items():
        form.query_one(f"#{name}", Input).value = value


async def test_a_topic_over_a_time_range_newest_first_in_pages(
        cluster: BackgroundCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MessageSearchScreen, "PAGE_SIZE", 3)
    cluster.create_topic("Orders", queues=2)
    sent = [cluster.send("Orders", f'{{"n": {i}}}'.encode(), queue_id=i % 2)
            for i in range(9)]
    order = store_order(cluster, sent)
    times = {k: t for k, (t, _) in order.items()}
    begin = times[sent[2].offset_msg_id]
    # sent[2:] and any stored in the same millisecond, newest first
    wanted = sorted((k for k, t in times.items() if t >= begin), key=order.__getitem__,
                    reverse=True)
    app = dashboard(cluster.ns, start="messages")
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, MessageSearchScreen)
        assert isinstance(screen, MessageSearchScreen)
        await pilot.press("t")
        await fill(pilot, topic="Orders", **{"from": str(begin)})
        await pilot.press("enter")
        pages: list[list[str]] = []
        while True:
            await until(pilot, lambda: screen.result is not None and not screen.searching
                        and screen.page == len(pages), what=f"page {len(pages) + 1}")
            shown = table(pilot).shown_rows()
            stored = [r["storedMs"] for r in shown]
            assert stored == sorted(stored, reverse=True)  # newest first
            assert all(r["storedMs"] <= min(times[k] for p in pages for k in p)
                       for r in shown if pages)  # each page older than the one before
            pages.append([str(r["key"]) for r in shown])
            assert screen.result is not None
            if screen.result.next is None:
                break
            assert len(shown) == 3
            await pilot.press("n")
        assert [k for p in pages for k in p] == wanted
        assert pages[0][0] == sent[-1].offset_msg_id
        assert f"page {len(pages)}" in text_of(screen, "#search-line")
        await pilot.press("p")  # back to the newer page
        await until(pilot, lambda: screen.page == len(pages) - 2 and not screen.searching,
                    what="the newer page")
        assert [str(r["key"]) for r in table(pilot).shown_rows()] == pages[-2]


async def test_by_key_and_by_either_id_into_the_detail(cluster: BackgroundCluster,
                                                        tmp_path: Path) -> None:
    cluster.create_topic("Orders", queues=2)
    cluster.send("Orders", b"other", keys="order-1")
    sent = cluster.send("Orders", b'{"order": 9, "items": ["tea"]}', keys="order-9",
                        tags="paid")
    app = dashboard(cluster.ns, start="messages")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, MessageSearchScreen)
        await pilot.press("k")
        assert isinstance(app.screen, SearchForm)
        await type_text(pilot, "Orders")  # as a user types it: the topic, Tab, the key
        await pilot.press("tab")
        await type_text(pilot, "order-9")
        await pilot.press("enter")  # one message has the key: its detail opens
        detail = await loaded(pilot, MessageDetailScreen)
        assert isinstance(detail, MessageDetailScreen)
        assert detail.found.record.offset_msg_id == sent.offset_msg_id
        body = text_of(detail, "#body-text")
        assert '"order": 9,\n  "items": [\n    "tea"' in body  # JSON pretty-printed
        assert "JSON" in text_of(detail, "#body-title")
        props = text_of(detail, "#properties")
        assert "order-9" in props and "paid" in props
        stored = text_of(detail, "#stored")
        assert sent.offset_msg_id in stored and "commit-log offset" in stored
        await pilot.press("h")
        assert "7b 22 6f 72 64 65 72 22" in text_of(detail, "#body-text")  # {"order"
        assert "hex" in text_of(detail, "#body-title")
        await pilot.press("h")
        assert '"order": 9' in text_of(detail, "#body-text")

        await pilot.press("e")  # export
        assert isinstance(app.screen, Prompt)
        target = tmp_path / "exported.json"
        app.screen.query_one("#answer", Input).value = str(target)
        await pilot.press("enter")
        await until(pilot, lambda: detail.exported is not None, what="the export")
        assert detail.exported == target
        written = json.loads(target.read_text(encoding="utf-8"))
        assert written["body"] == '{"order": 9, "items": ["tea"]}'
        assert written["properties"]["KEYS"] == "order-9"
        assert written["offsetMsgId"] == sent.offset_msg_id

        for msg_id, kind in ((sent.msg_id, "message id"),
                             (sent.offset_msg_id, "offset message id")):
            await pilot.press("escape")
            await loaded(pilot, MessageSearchScreen)
            await pilot.press("i")
            await fill(pilot, id=msg_id, topic="")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MessageDetailScreen),
                        what=f"the message by its {kind}")
            detail = await loaded(pilot, MessageDetailScreen)
            assert isinstance(detail, MessageDetailScreen)
            assert detail.id_kind == kind
            assert detail.found.record.offset_msg_id == sent.offset_msg_id
            assert f"Found by its {kind}." in text_of(detail, "#summary")
            assert "order-9" in text_of(detail, "#properties")


async def test_an_unknown_id_says_why(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders")
    app = dashboard(cluster.ns, start="messages")
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, MessageSearchScreen)
        await pilot.press("i")
        await fill(pilot, id="0A0000050000" + "0" * 20)
        await pilot.press("enter")
        await until(pilot, lambda: "Tried as an offset message id" in
                    text_of(screen, "#search-line"), what="the reason")
        assert "failed" in text_of(screen, "#search-line") and not table(pilot).all_rows


async def test_resend_to_a_group_and_consume_directly_are_audited(
        cluster: BackgroundCluster) -> None:
    setup_group(cluster, "g1", "Orders")
    sent = cluster.send("Orders", b"again please", keys="order-9")
    consumer = cluster.consumer_online("g1", ("Orders",))
    app = dashboard(cluster.ns, start="messages")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, MessageSearchScreen)
        await pilot.press("i")
        await fill(pilot, id=sent.msg_id, topic="Orders")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MessageDetailScreen), what="the message")
        detail = await loaded(pilot, MessageDetailScreen)
        assert [r["group"] for r in table(pilot, "#tracks").all_rows] == ["g1"]

        await pilot.press("r")
        assert isinstance(app.screen, Pick)
        await pilot.press("enter")
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
        assert dialog.outcome is not None and dialog.outcome.rows[0]["verified"] is True
        await pilot.press("escape")
        assert app.screen is detail

        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, Pick), what="the clients")
        await pilot.press("enter")
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
        assert dialog.outcome is not None
        assert dialog.outcome.rows[0]["clientId"] == consumer.client_id
        assert dialog.outcome.rows[0]["consumeResult"] == "CR_SUCCESS"
        await pilot.press("escape")

    records = {r["command"]: r for r in history.records(limit=10, detail=True)}
    resent, direct = records["resendMessage"], records["consumeMessageDirectly"]
    for record in (resent, direct):
        assert record["via"] == "dashboard" and record["outcome"] == "applied"
        assert record["args"]["msg_id"] == sent.offset_msg_id
    assert resent["args"]["group"] == "g1"
    assert direct["args"]["client_id"] == consumer.client_id


async def test_the_producers_screen_lists_a_live_producer(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders")
    cluster.producer_online("order-producers", "10.0.0.7@orders-1")
    app = dashboard(cluster.ns, start="producers")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, ProducersScreen)
        await pilot.press("g")
        await fill(pilot, group="order-producers", topic="Orders")
        await pilot.press("enter")
        await until(pilot, lambda: [r["clientId"] for r in table(pilot).all_rows] ==
                    ["10.0.0.7@orders-1"], what="the producer's client")
        row = table(pilot).all_rows[0]
        assert row["language"] and row["version"] and row["clientAddr"]


async def test_a_traced_message_shows_its_timeline(traced: BackgroundCluster) -> None:
    """Sent (the producer's Pub: group, status, cost), stored, delivered and consumed (the
    consumer's SubBefore and SubAfter), in that order; an untraced message shows its own two
    steps and why there is no trace."""
    sent = send_and_consume(traced)
    untraced = traced.send(TOPIC, b"not traced")
    app = dashboard(traced.ns, start="messages")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, MessageSearchScreen)
        await pilot.press("i")
        await fill(pilot, id=sent.msg_id, topic=TOPIC)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MessageDetailScreen), what="the message")
        detail = await loaded(pilot, MessageDetailScreen)
        await until(pilot, lambda: len(table(pilot, "#timeline").all_rows) == 4,
                    what="the timeline")
        steps = table(pilot, "#timeline").shown_rows()
        assert [s["step"] for s in steps] == ["sent", "stored", "delivered", "consumed"]
        assert (steps[0]["group"], steps[0]["status"]) == ("OrderPG", "success")
        assert steps[0]["cost"] is not None and steps[0]["cost"] >= 0
        assert steps[1]["client"] == traced.broker_addr
        assert [(s["group"], s["status"]) for s in steps[2:]] == [("OrderCG", ""),
                                                                 ("OrderCG", "success")]
        assert text_of(detail, "#timeline-note") == ""

        await pilot.press("escape")
        await pilot.press("i")
        await fill(pilot, id=untraced.msg_id, topic=TOPIC)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MessageDetailScreen)
                    and app.screen is not detail, what="the untraced message")
        await loaded(pilot, MessageDetailScreen)
        await until(pilot, lambda: len(table(pilot, "#timeline").all_rows) == 2,
                    what="its own steps")
        assert [s["step"] for s in table(pilot, "#timeline").shown_rows()] == ["sent",
                                                                               "stored"]
        assert "no trace of message" in text_of(app.screen, "#timeline-note")
