"""Fixtures of the store tests: tiny segments under tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.store import MessageStore
from tests.store.helpers import Clock, small_config


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., MessageStore]:
    def make(root: Path | None = None, **kw: Any) -> MessageStore:
        extra = {k: kw.pop(k) for k in ("clock", "disk_usage", "total_physical_memory") if k in kw}
        store = MessageStore(small_config(root or tmp_path / "store", **kw), **extra)
        store.load()
        return store

    return make


@pytest.fixture
async def store(make_store: Callable[..., MessageStore]) -> AsyncIterator[MessageStore]:
    s = make_store()
    await s.start()
    yield s
    await s.shutdown()
