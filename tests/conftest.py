"""Shared fixtures: the spec material beside the project, a name server on port 0, a client;
the scheduling of the tests under pytest-xdist."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from engine.namesrv.config import NamesrvConfig
from engine.namesrv.controller import NamesrvController
from engine.remoting.client import RemotingClient
from tests.prometheus import PROMETHEUS, SKIP_REASON, PrometheusLauncher

#: The health checks no test may run with: they depend on how fast (how busy) the machine is.
SPEED_HEALTH_CHECKS = [HealthCheck.too_slow]
#: For the property tests that build a store from a function-scoped fixture once per example.
FIXTURE_HEALTH_CHECKS = [*SPEED_HEALTH_CHECKS, HealthCheck.function_scoped_fixture]

# One Hypothesis profile for the whole suite: no deadline and no speed-dependent health check
# (a loaded machine must not fail a test), and the same examples on every run (derandomize), so
# a red run is reproducible.  Each property runs the profile's 100 examples (no test raises it:
# with the same examples every run, more of them only cost time); `pytest
# --hypothesis-profile=explore` searches with 2,000 fresh random examples a property, for a
# deliberate look for new failures.
settings.register_profile("suite", deadline=None, suppress_health_check=SPEED_HEALTH_CHECKS,
                          derandomize=True, print_blob=True)
settings.register_profile("explore", deadline=None, suppress_health_check=SPEED_HEALTH_CHECKS,
                          max_examples=2000, print_blob=True)
settings.load_profile("suite")

#: Frames captured from real clients (tests/data/golden/README.md).
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: only called where it runs
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` keeps the Spark tests on one worker (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import FoldersOnOneWorker

    return FoldersOnOneWorker(config, log)


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN


def namesrv_config(root: Path, **changes: Any) -> NamesrvConfig:
    """A name server on 127.0.0.1, port 0, with every file under `root`."""
    return NamesrvConfig(
        rocketmq_home=str(root),
        kv_config_path=str(root / "namesrv" / "kvConfig.json"),
        config_store_path=str(root / "namesrv" / "namesrv.properties"),
        logs_dir=str(root / "logs"),
        bind_address="127.0.0.1",
        listen_port=0,
        **changes,
    )


def addr_of(controller: NamesrvController) -> str:
    return f"127.0.0.1:{controller.port}"


def closed_port_addr() -> str:
    """An address nothing listens on (a port just released by the OS)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(namesrv_config(tmp_path))
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[PrometheusLauncher]:
    """Starts real Prometheus servers (data under tmp_path) and stops them after the test."""
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    launcher = PrometheusLauncher(tmp_path / "prometheus", PROMETHEUS)
    try:
        yield launcher
    finally:
        launcher.stop_all()
