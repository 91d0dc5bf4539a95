"""``mqadmin dev up``'s /metrics endpoints: the brokers' configs ask for Apache's PROM
exporter on a port of their own, the lag collector serves its metrics, `up` prints both and
keeps them on a second `up`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqadmin.dev import cluster as dev

from .cli import invoke


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "dev"
    try:
        yield path
    finally:
        dev.down(path, timeout=5)


def test_dev_up_prints_and_serves_metrics(data_dir: Path) -> None:
    up = invoke("dev", "up", "--data-dir", str(data_dir), "-o", "json")
    assert up.exit_code == 0, up.stderr
    state = dev.read_state(data_dir.resolve())
    assert state is not None
    urls = dev.metrics_urls(state)
    assert set(urls) == {"broker-a-n1", "broker-a-n2", "lag"}
    assert len(set(urls.values())) == 3
    for name, url in urls.items():
        assert f"Prometheus:     {url}  ({name})" in up.stderr
    for broker in ("broker-a-n1", "broker-a-n2"):
        conf = (data_dir / f"{broker}.conf").read_text().splitlines()
        port = urls[broker].rsplit(":", 1)[1].removesuffix("/metrics")
        assert {"metricsExporterType=PROM", "metricsPromExporterHost=127.0.0.1",
                f"metricsPromExporterPort={port}"} <= set(conf)
    text, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline and 'rocketmq_lag_cycles_total{cluster="dev"}' not in text:
        with contextlib.suppress(httpx.TransportError):
            text = httpx.get(urls["lag"], timeout=5).text
        time.sleep(0.2)
    assert 'rocketmq_lag_cycles_total{cluster="dev"}' in text
    assert "# TYPE rocketmq_group_diff gauge" in text

    again = invoke("dev", "up", "--data-dir", str(data_dir), "-o", "json")
    assert again.exit_code == 0 and "already running" in again.stderr
    assert all(url in again.stderr for url in urls.values())
