"""SVG snapshots of every screen (pytest-textual-snapshot): layout changes show in review.
Update them with `pytest tests/mqadmin/tui/test_snapshots.py --snapshot-update`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.mqadmin.tui.snapshot_data import SnapshotDashboard, shown

SIZE = (150, 30)


@pytest.mark.parametrize("screen", ["cluster", "topics", "groups", "dlq", "ha", "cleanup",
                                    "audit", "access"])
def test_screen(screen: str, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_HOME", "/home/ops/.mqadmin")  # the audit screen names it
    assert snap_compare(SnapshotDashboard(screen), terminal_size=SIZE, run_before=shown)


def test_key_list(snap_compare: Any) -> None:
    assert snap_compare(SnapshotDashboard("topics"), press=["question_mark"],
                        terminal_size=SIZE, run_before=shown)
