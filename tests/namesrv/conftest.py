"""Fixtures: a name server in-process on port 0 with its files under tmp_path, and a client."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.namesrv.config import NamesrvConfig
from engine.namesrv.controller import NamesrvController
from engine.remoting.client import RemotingClient


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def namesrv_config(tmp_path: Path, **changes: object) -> NamesrvConfig:
    return dataclasses.replace(
        NamesrvConfig(),
        rocketmq_home=str(tmp_path),
        kv_config_path=str(tmp_path / "namesrv" / "kvConfig.json"),
        config_store_path=str(tmp_path / "namesrv" / "namesrv.properties"),
        logs_dir=str(tmp_path / "logs"),
        bind_address="127.0.0.1",
        listen_port=0,
        **changes,  # type: ignore[arg-type]
    )


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


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    try:
        yield c
    finally:
        await c.close()


def addr_of(controller: NamesrvController) -> str:
    return f"127.0.0.1:{controller.port}"
