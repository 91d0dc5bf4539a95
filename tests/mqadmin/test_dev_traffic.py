"""The dev cluster's demo traffic keeps producing across `mqadmin switchover` and `failover`
(real processes), and logs the send errors it met meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.client.admin.cluster import MQAdmin
from engine.remoting import loop
from mqadmin.dev import access
from mqadmin.dev import cluster as dev

from .cli import invoke, rows_of
from .test_dev import kill_9, status_of, until_slave_connected


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "dev"
    try:
        yield path
    finally:
        dev.down(path, timeout=5)


def stored(namesrv: str, master: str, data_dir: Path) -> int:
    """Orders stored on `master` (the sum of DemoOrders' queue max offsets), read as the
    dev cluster's SUPER user (access control is on)."""
    keys = access.existing(data_dir)

    async def read() -> int:
        async with MQAdmin(namesrv, credentials=keys.admin if keys else None) as admin:
            stats = await admin.broker.topic_stats(master, "DemoOrders")
            return sum(o.max_offset for o in stats.offset_table.values())
    return loop.run(read())


def until_growing(namesrv: str, master: str, data_dir: Path, by: int = 10,
                  timeout: float = 40) -> None:
    """Until the traffic (another process) stored `by` more orders on `master`."""
    start = stored(namesrv, master, data_dir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stored(namesrv, master, data_dir) >= start + by:
            return
        time.sleep(0.2)
    raise AssertionError(f"the demo traffic stored fewer than {by} orders on {master} "
                         f"within {timeout} s")


def test_traffic_survives_switchover_and_failover(data_dir: Path) -> None:
    up = invoke("dev", "up", "--data-dir", str(data_dir), "--rate", "20", "--open",
                "-o", "json")
    assert up.exit_code == 0, up.stderr
    procs = {r["process"]: r for r in rows_of(up)}
    namesrv = procs["namesrv"]["addr"]
    n1, n2 = procs["broker-a-n1"]["addr"], procs["broker-a-n2"]["addr"]
    until_growing(namesrv, n1, data_dir)
    until_slave_connected(namesrv)
    switched = invoke("switchover", "-b", dev.BROKER, "--context", "dev", "--yes")
    assert switched.exit_code == 0, switched.stderr
    until_growing(namesrv, n2, data_dir)  # n2 is the master now: the traffic followed it

    until_slave_connected(namesrv)
    _, status, _ = status_of(data_dir)
    kill_9(status["broker-a-n2"]["pid"])
    failed_over = invoke("failover", "-b", dev.BROKER, "--context", "dev", "--accept-loss",
                         "--yes")
    assert failed_over.exit_code == 0, failed_over.stderr
    until_growing(namesrv, n1, data_dir)  # and back to n1 after the failover
    log = (data_dir / "logs" / "traffic.out").read_text()
    assert "send to DemoOrders failed" in log or "WARNING" in log, log[-2000:]
