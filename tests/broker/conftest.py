"""Fixtures: a broker in-process on port 0 (beside the shared name server), store under tmp_path."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.broker.config import BrokerConfig, MetricsExporterType
from engine.broker.controller import BrokerController
from engine.broker.state import wall_clock_ms
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.message import MessageRecord, decode_records
from engine.remoting.client import RemotingClient
from engine.store.config import MessageStoreConfig
from tests.broker.helpers import pull_request
from tests.clock import ManualClock


def broker_configs(tmp_path: Path, namesrv_addr: str | None, name: str = "broker-a",
                   **changes: Any) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Small segments, loopback, port 0; `changes` may name fields of either config."""
    broker_fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    broker = BrokerConfig(
        namesrv_addr=namesrv_addr, broker_ip1="127.0.0.1", broker_name=name,
        bind_address="127.0.0.1", listen_port=0,
        logs_dir=str(tmp_path / "logs"),
        **{k: v for k, v in changes.items() if k in broker_fields})
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path / name / "store"),
                               mapped_file_size_commit_log=1024 * 1024,
                               mapped_file_size_consume_queue=1000 * 20)
    for key, value in changes.items():
        if key not in broker_fields:
            setattr(store, key, value)
    return broker, store


@contextlib.asynccontextmanager
async def running_broker(tmp_path: Path, namesrv: NamesrvController, *,
                         clock: Callable[[], int] = wall_clock_ms,
                         **changes: Any) -> AsyncIterator[BrokerController]:
    """A started broker registered with `namesrv`; `changes` as for `broker_configs`."""
    config, store = broker_configs(tmp_path, f"127.0.0.1:{namesrv.port}", **changes)
    controller = BrokerController(config, store, clock=clock)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv) as controller:
        yield controller


@pytest.fixture
async def prom_broker(tmp_path: Path, namesrv: NamesrvController
                      ) -> AsyncIterator[BrokerController]:
    """A broker serving /metrics (metricsExporterType=PROM) on a port of the OS's choosing."""
    async with running_broker(tmp_path, namesrv,
                              metrics_exporter_type=MetricsExporterType.PROM,
                              metrics_prom_exporter_host="127.0.0.1",
                              metrics_prom_exporter_port=0) as controller:
        yield controller


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def call(client: RemotingClient, addr: str, code: int, ext: dict[str, str] | None = None,
               body: bytes | None = None, version: int | None = None) -> RemotingCommand:
    cmd = request(code, ext, body) if version is None else request(code, ext, body,
                                                                    version=version)
    return await client.invoke(addr, cmd, timeout=10)


async def pull_all(client: RemotingClient, broker: BrokerController, topic: str,
                   queue_id: int = 0) -> list[MessageRecord]:
    """The records of a queue from offset 0 (one PULL; [] when none)."""
    resp = await client.invoke(broker.addr, pull_request(topic, queue_id, 0))
    if resp.code != ResponseCode.SUCCESS:
        return []
    return decode_records(resp.body or b"")
