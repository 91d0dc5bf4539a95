"""Fixtures: the name server with an injectable clock (expiry without 120-second sleeps)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from tests.clock import ManualClock
from tests.conftest import namesrv_config


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def namesrv(tmp_path: Path, clock: ManualClock) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(namesrv_config(tmp_path), clock=clock)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()
