"""Dead letters in the dashboard: list, messages with the body viewer, select two and
resend them (seen consumed in the batch status), discard the rest (then nothing is left to
resend, and nothing is recorded for it), export."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Input

from mqadmin import history
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.dlq import DlqScreen
from mqadmin.tui.screens.dlq_group import DlqGroupScreen, LetterScreen
from mqadmin.tui.widgets.dialogs import Prompt
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import bury, consume, setup_group, stop
from tests.mqadmin.tui.pilot import SIZE, dashboard, keys_of, loaded, table, type_text, until
from tests.mqadmin.tui.test_changes import finish


async def test_resend_discard_and_export_dead_letters(cluster: BackgroundCluster,
                                                      tmp_path: Path) -> None:
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 4)
    consumer, got = consume(cluster, "g1", "Orders")
    try:
        app = dashboard(cluster.ns, start="dlq")
        async with app.run_test(size=SIZE) as pilot:
            overview = await loaded(pilot, DlqScreen)
            row = table(pilot, "#dlq-groups").row_by_key("g1")
            assert row is not None and (row["deadLetters"], row["unhandled"]) == (4, 4)
            await pilot.press("enter")
            letters = await loaded(pilot, DlqGroupScreen)
            assert len(keys_of(pilot)) == 4
            await pilot.press("enter")  # the body viewer
            assert isinstance(app.screen, LetterScreen)
            assert '"reason":' in str(app.screen.query_one("#record-text").render())
            await pilot.press("escape")
            await pilot.press("space", "space")  # select the first two
            chosen = set(letters.marked)
            assert len(chosen) == 2
            await pilot.press("r")
            dialog = await finish(pilot)
            assert dialog.state == "done", dialog.outcome
            assert dialog.outcome is not None and dialog.outcome.rows[0]["sent"] == 2
            batch = dialog.outcome.rows[0]["batch"]
            await pilot.press("escape")
            await until(pilot, lambda: {r["msgId"] for r in table(pilot).all_rows
                                        if r["triage"] == "resent"} == chosen,
                        what="the two resent")
            cluster.call(got.wait_linked(2))

            await pilot.press("x")  # the other two, discarded with a reason
            assert isinstance(app.screen, Prompt)
            await type_text(pilot, "known bad prices")
            await pilot.press("enter")
            dialog = await finish(pilot)
            assert dialog.state == "done", dialog.outcome
            assert dialog.outcome is not None and dialog.outcome.rows[0]["discarded"] == 2
            await pilot.press("escape")

            await pilot.press("r")  # every one is handled now: nothing to resend
            await until(pilot, lambda: isinstance(app.screen, ChangeScreen)
                        and app.screen.state != "planning", what="the plan")
            assert isinstance(app.screen, ChangeScreen) and app.screen.state == "nothing"
            assert "no dead letter to resend" in str(
                app.screen.query_one("#change-status").render())
            await pilot.press("y")  # applies nothing
            assert app.screen.state == "nothing"
            await pilot.press("escape")

            await pilot.press("e")
            assert isinstance(app.screen, Prompt)
            app.screen.query_one("#answer", Input).value = str(tmp_path / "g1.jsonl")
            await pilot.press("enter")
            await until(pilot, lambda: (tmp_path / "g1.jsonl").exists(), what="the export")
            lines = (tmp_path / "g1.jsonl").read_text().splitlines()
            assert len(lines) == 4 and json.loads(lines[0])["originTopic"] == "Orders"

            await pilot.press("escape")
            await loaded(pilot, DlqScreen)
            await until(pilot, lambda: (overview.action_refresh_now() or True) and (
                table(pilot, "#dlq-batches").row_by_key(batch) or {}).get("consumed") == 2,
                timeout=60, what="the resent copies consumed")
            row = table(pilot, "#dlq-groups").row_by_key("g1")
            assert row is not None and row["unhandled"] == 0
        audited = history.records()
        assert [r["command"] for r in audited] == ["dlq resend", "dlq discard"]
    finally:
        stop(cluster, consumer)
