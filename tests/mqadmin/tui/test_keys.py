"""`?` leads with what the screen can do (as k9s does): its own keys first, then the
dashboard's, then Textual's generic cursor, focus and copy keys."""

from __future__ import annotations

from mqadmin.tui.widgets.dialogs import KeyList
from tests.mqadmin.tui.snapshot_data import SnapshotDashboard, shown


async def test_the_key_list_leads_with_the_screens_own_keys() -> None:
    app = SnapshotDashboard("topics")
    async with app.run_test(size=(150, 40)) as pilot:
        await shown(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, KeyList)
        titles = [s.title for s in app.screen.sections]
        assert titles == ["Topics", "Everywhere", "Cursor, focus and copy"]
        own, everywhere, generic = (dict(s.keys) for s in app.screen.sections)
        assert list(own)[:4] == ["enter", "c", "e", "d"]  # the screen's, before its base's
        assert own["enter"] == "Routes & queues"  # not the table's generic "Select"
        assert {"/", "ctrl+r", "s"} <= set(own)
        assert {":", "?", "q", "2"} <= set(everywhere)
        assert {"up", "pagedown", "tab"} <= set(generic)
        assert not set(own) & set(everywhere) and not set(own) & set(generic)
