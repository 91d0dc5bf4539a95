"""Fixtures of the dashboard tests: the lag sampling of the Groups screens kept short."""

from __future__ import annotations

import pytest

from mqadmin.tui.data import lag


@pytest.fixture(autouse=True)
def quick_lag_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no collector runs, the Groups and group screens sample lag twice, half a second
    apart, on their first read; 50 ms apart here.  Both spans are far below the commit
    interval, so the verdicts are the same (a stuck offset stays UNKNOWN, not STALL)."""
    monkeypatch.setattr(lag, "SPACING", 0.05)
