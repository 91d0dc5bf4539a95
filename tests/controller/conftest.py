"""Fixtures of the controller tests: broker processes (killed when a test ends), a fast
controller on port 0, mqadmin's home under tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.controller.manager import ControllerManager
from tests.controller.test_server import controller_config, now_ms
from tests.ha.procs import brokers

__all__ = ["brokers"]


@pytest.fixture(autouse=True)
def mqadmin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mqadmin's contexts and audit database under tmp_path, nothing inherited."""
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "mqadmin-home"))
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[ControllerManager]:
    manager = ControllerManager(controller_config(
        tmp_path, scan_not_active_broker_interval=200, scan_inactive_master_interval=200),
        clock=now_ms)
    await manager.start()
    yield manager
    await manager.stop()
