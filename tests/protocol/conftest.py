"""Every protocol test runs twice: with the native extension's fast paths (when it is
built) and with the pure-Python reference alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.protocol import native


@pytest.fixture(autouse=True, params=["native", "pure"])
def codec_path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "native":
        if not native.load():
            pytest.skip("the native extension is not built (or MQ_PURE_PYTHON is set)")
    else:
        native.unload()
    try:
        yield request.param
    finally:
        native.load()
