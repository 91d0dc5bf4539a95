"""Fixtures for the lag monitor: a name server and broker-a in-process (port 0, store under
tmp_path; `metrics_lab`: with the broker's own /metrics), a producer and offset commits
through the real client, mqadmin's home under tmp_path."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.config import MetricsExporterType
from engine.broker.controller import BrokerController
from engine.client.admin.cluster import MQAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.conftest import addr_of
from tests.sending import send_one


@pytest.fixture
def quick_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mqadmin lag status` without a collector samples three times, 50 ms apart instead of
    half a second: for tests of what it reads and shows, not of rates over time (the span
    stays far below a client's commit interval, so the verdicts are the same)."""
    from mqadmin.operations.lag import status
    monkeypatch.setattr(status, "QUICK_SPACING", 0.05)


@pytest.fixture(autouse=True)
def mqadmin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "mqadmin-home"
    monkeypatch.setenv("MQADMIN_HOME", str(home))
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("MQADMIN_CONTEXT", raising=False)
    return home


class Lab:
    """The running cluster and the few things tests do to it."""

    def __init__(self, namesrv: NamesrvController, broker: BrokerController) -> None:
        self.namesrv = namesrv
        self.broker = broker
        self.client = RemotingClient()
        self.admin = MQAdmin(self.ns)

    @property
    def metrics_url(self) -> str:
        """The broker's own /metrics (`metrics_lab` only)."""
        assert self.broker.metrics is not None, "the broker serves no /metrics"
        return f"http://127.0.0.1:{self.broker.metrics.port}/metrics"

    @property
    def ns(self) -> str:
        return addr_of(self.namesrv)

    @property
    def addr(self) -> str:
        return self.broker.addr

    async def topic(self, topic: str, queues: int = 2) -> None:
        await self.admin.broker.create_topic(self.addr, TopicConfig(topic, queues, queues))
        await self.broker.registration.register_all()

    async def group(self, group: str, *topics: str, queues: int = 2) -> None:
        """A consumer group as the name servers list it (its retry topic exists)."""
        await self.topic(f"%RETRY%{group}", 1)
        for t in topics:
            await self.topic(t, queues)

    async def send(self, topic: str, n: int = 1, queue_id: int = 0, body: bytes = b"x") -> None:
        for _ in range(n):
            await send_one(self.client, self.addr, "broker-a", topic, body,
                           queue_id=queue_id)

    async def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        await self.admin.broker.update_consumer_offset(self.addr, group, topic, queue_id,
                                                       offset)

    async def close(self) -> None:
        await self.admin.close()
        await self.client.close()


@pytest.fixture
async def lab(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Lab]:
    async with running_broker(tmp_path, namesrv) as broker:
        lab = Lab(namesrv, broker)
        try:
            yield lab
        finally:
            await lab.close()


@pytest.fixture
async def metrics_lab(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Lab]:
    """The lab with the broker's /metrics on (metricsExporterType=PROM, 127.0.0.1, port 0)."""
    async with running_broker(tmp_path, namesrv,
                              metrics_exporter_type=MetricsExporterType.PROM,
                              metrics_prom_exporter_host="127.0.0.1",
                              metrics_prom_exporter_port=0) as broker:
        lab = Lab(namesrv, broker)
        try:
            yield lab
        finally:
            await lab.close()


def wall_ms() -> int:
    return int(time.time() * 1000)
