"""The Cluster screen's data shows the timer messages waiting in each broker and how far its
wheel is behind (5.x runtime-info keys timerCongestNum and timerReadBehind)."""

from __future__ import annotations

import time

from engine.protocol.codes import ResponseCode
from mqadmin.tui.data.cluster import read_cluster
from tests.broker.helpers import send_request
from tests.mqadmin.conftest import BackgroundCluster


def test_cluster_rows_show_waiting_timers(cluster: BackgroundCluster) -> None:
    assert cluster.client is not None
    for i in range(2):
        cmd = send_request("Later", b"t%d" % i, extra={"TIMER_DELAY_SEC": "3600"})
        resp = cluster.call(cluster.client.invoke(cluster.broker_addr, cmd))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    deadline = time.monotonic() + 10
    while True:
        [row] = cluster.admin_call(read_cluster).brokers
        if row["timers"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)  # the broker enqueues in its own loop; the dashboard polls too
    assert row["timers"] == 2
    assert row["timerLag"] == "0 s"
