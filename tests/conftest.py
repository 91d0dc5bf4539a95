"""Shared fixtures: where the shared spec material lives."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    path = SHARED / "golden"
    if not path.is_dir():
        pytest.skip("the shared golden captures are not beside the project")
    return path
