"""`mqadmin dashboard` without a terminal says so instead of drawing into a pipe."""

from __future__ import annotations

from tests.mqadmin.cli import invoke


def test_the_dashboard_needs_a_terminal() -> None:
    result = invoke("dashboard", "-n", "127.0.0.1:9876")
    assert result.exit_code == 2
    assert "needs a terminal" in result.output
