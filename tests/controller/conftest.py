"""Fixtures of the controller tests: broker processes (killed when a test ends), mqadmin's
home under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ha.procs import brokers

__all__ = ["brokers"]


@pytest.fixture(autouse=True)
def mqadmin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mqadmin's contexts and audit database under tmp_path, nothing inherited."""
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "mqadmin-home"))
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
