"""Fixtures of the HA tests: broker processes (procs.py) and in-process brokers (inproc.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from tests.ha.inproc import MakeBroker, make_brokers
from tests.ha.procs import brokers

__all__ = ["brokers", "make_broker"]


@pytest.fixture
async def make_broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[MakeBroker]:
    """Starts brokers in this process (port 0, fast HA timings); stops them at the end."""
    async for make in make_brokers(tmp_path, namesrv):
        yield make
