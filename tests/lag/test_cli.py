"""``mqadmin lag status`` (quick sampling) and ``lag collect`` as a real process: SIGTERM
finishes the cycle, writes the history, prints its summary; `lag status` then reads the
collector's window."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqadmin.exit_codes import ExitCode
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, start_cluster

#: What status reads and shows, not rates over time: quick sampling 50 ms apart.
pytestmark = pytest.mark.usefixtures("quick_sampling")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = start_cluster(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def lagging_group(cluster: BackgroundCluster) -> None:
    cluster.create_topic("%RETRY%laggard", queues=1)
    cluster.create_topic("Orders", queues=2)
    for _ in range(4):
        cluster.send("Orders", queue_id=0)
    cluster.commit("laggard", "Orders", 0, 1)
    cluster.call(cluster.broker.registration.register_all())  # type: ignore[union-attr]


def test_status_samples_when_no_collector_runs(cluster: BackgroundCluster) -> None:
    lagging_group(cluster)
    result = invoke("lag", "status", "-n", cluster.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["group"], row["verdict"], row["lag"]) == ("laggard", "ERROR", 3)
    assert row["rule"].startswith("STOP") and row["eta"] == "never at the current rate"
    assert "quick sampling" in result.stderr
    queues = json.loads(invoke("lag", "status", "-n", cluster.ns, "--queues", "-g", "laggard",
                               "-o", "json").stdout)
    assert [(q["queueId"], q["verdict"]) for q in queues] == [(0, "STOP"), (1, "OK")]
    missing = invoke("lag", "status", "-n", cluster.ns, "-g", "nobody")
    assert missing.exit_code == ExitCode.USAGE and "no samples of group" in missing.stderr


def test_status_does_not_call_an_online_group_stalled_between_its_commits(
        cluster: BackgroundCluster) -> None:
    """An online group whose offset did not move over the quick sampling's second may be
    between two of its commits (clients commit every 5 s): UNKNOWN, not ERROR STALL."""
    lagging_group(cluster)
    cluster.consumer_online("laggard", ("Orders",))
    result = invoke("lag", "status", "-n", cluster.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["group"], row["verdict"], row["lag"]) == ("laggard", "UNKNOWN", 3)
    assert "too short to judge" in row["rule"] and "5 s" in row["rule"]


def test_bad_options_are_usage_errors() -> None:
    bad = invoke("lag", "collect", "-n", "127.0.0.1:9", "--interval", "10 parsecs")
    assert bad.exit_code == ExitCode.USAGE and "500ms, 10s, 1m" in bad.stderr
    hook = invoke("lag", "collect", "-n", "127.0.0.1:9", "--webhook", "ftp://x")
    assert hook.exit_code == ExitCode.USAGE and "http(s) URL" in hook.stderr


def test_collect_process_stops_cleanly_on_sigterm(cluster: BackgroundCluster,
                                                  tmp_path: Path, mqadmin_home: Path) -> None:
    lagging_group(cluster)
    data = tmp_path / "data"
    env = {**os.environ, "MQADMIN_HOME": str(mqadmin_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin.app", "lag", "collect", "-n", cluster.ns,
         "--interval", "200ms", "--data-dir", str(data), "-o", "json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = data / "logs" / "lag-collect.log"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if log.exists() and "cycle 3:" in log.read_text():
                break
            time.sleep(0.1)
        status = invoke("lag", "status", "-n", cluster.ns, "-o", "json")
        assert status.exit_code == 0 and "collector's window" in status.stderr
        assert json.loads(status.stdout)[0]["group"] == "laggard"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    [summary] = json.loads(out)
    # The first cycle is written at once, the rest at stop.
    assert summary["cycles"] >= 3 and summary["historyFiles"] == 2
    assert summary["cluster"] == cluster.ns
    assert "signal received" in log.read_text() and "stopped after" in log.read_text()
    assert list((data / "lag-history").glob("date=*/part-*.parquet"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_port_in_use_is_a_one_line_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("lag", "collect", "-n", "127.0.0.1:9", "--metrics-host", "127.0.0.1",
                        "--metrics-port", str(port))
    assert result.exit_code == ExitCode.USAGE
    [line] = [x for x in result.stderr.splitlines() if "--metrics-port" in x]
    assert "in use" in line and "pick another port" in line


def test_collect_serves_metrics_until_sigterm(cluster: BackgroundCluster, tmp_path: Path,
                                              mqadmin_home: Path) -> None:
    lagging_group(cluster)
    port = free_port()
    env = {**os.environ, "MQADMIN_HOME": str(mqadmin_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin.app", "lag", "collect", "-n", cluster.ns,
         "--interval", "200ms", "--data-dir", str(tmp_path / "data"), "-o", "json",
         "--metrics-host", "127.0.0.1", "--metrics-port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline and 'group="laggard"' not in text:
            with contextlib.suppress(httpx.TransportError):
                text = httpx.get(url, timeout=5).text
            time.sleep(0.1)
        assert 'rocketmq_group_diff{countOfOnlineConsumers="0",group="laggard"' in text
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"metrics at {url}" in err
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=5)
