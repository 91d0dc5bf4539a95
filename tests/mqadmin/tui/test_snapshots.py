"""SVG snapshots of every screen, so layout changes show in review as changed files.

Each screen is drawn on fixed data (snapshot_data.py) and exported with Textual's
`App.export_screenshot`; the SVG must equal the one under ``snapshots/``.  After an
intended change, accept the new pictures with ``UPDATE_SNAPSHOTS=1 pytest
tests/mqadmin/tui/test_snapshots.py`` and look at them before committing.
(pytest-textual-snapshot does the same, but its pinned syrupy needs pytest < 9.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mqadmin.tui.screens.message_detail import MessageDetailScreen
from tests.mqadmin.tui.snapshot_data import MESSAGE, SnapshotDashboard, fixed, shown

SIZE = (150, 30)
STORED = Path(__file__).with_name("snapshots")


async def picture(start: str, *keys: str) -> str:
    app = SnapshotDashboard(start)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot)
        if keys:
            await pilot.press(*keys)
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            await pilot.pause()
        return app.export_screenshot(title=f"mqadmin dashboard: {start} {' '.join(keys)}")


def compare(name: str, svg: str) -> None:
    path = STORED / f"{name}.svg"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        STORED.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path}: create it with UPDATE_SNAPSHOTS=1"
    assert svg == path.read_text(encoding="utf-8"), (
        f"{name} looks different from {path}: if the change is intended, run with "
        "UPDATE_SNAPSHOTS=1 and review the new SVG")


@pytest.fixture(autouse=True)
def fixed_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_HOME", "/home/ops/.mqadmin")  # the audit screen names it


@pytest.mark.parametrize("screen", ["cluster", "topics", "groups", "dlq", "ha", "cleanup",
                                    "audit", "access"])
async def test_screen(screen: str) -> None:
    compare(screen, await picture(screen))


async def test_key_list() -> None:
    compare("keys-topics", await picture("topics", "question_mark"))


async def test_message_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")  # the message's times are shown in local time
    time.tzset()
    try:
        app = SnapshotDashboard("messages")
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot)
            await app.push_screen(fixed(MessageDetailScreen)(MESSAGE, "message id"))
            await shown(pilot)
            svg = app.export_screenshot(title="mqadmin dashboard: a message")
    finally:
        monkeypatch.undo()
        time.tzset()
    compare("message", svg)
