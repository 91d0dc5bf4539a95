"""What an operator ran into: exit codes and messages of the cases docs/mqadmin.md's table
covers (a slave as updateTopic's target, sends during an outage or to a read-only topic,
unknown groups, queue ids outside the route, queue-number caps, log lines on the terminal,
the consume TPS, the hint of REQUEST_CODE_NOT_SUPPORTED from a broker)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import (
    BrokerNotFoundError,
    NoPermissionError,
    NoRouteError,
    RequestCodeNotSupportedError,
    SendFailedError,
    UnreachableError,
)
from engine.remoting.errors import RemotingConnectError
from engine.store.config import BrokerRole
from mqadmin.exit_codes import ExitCode, exit_code_for, message_for
from mqadmin.operations.topic import QUEUE_NUMS_MAX
from tests.broker.conftest import broker_configs

from .cli import invoke, json_rows
from .conftest import BackgroundCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def slave(cluster: BackgroundCluster, tmp_path: Path) -> Iterator[BrokerController]:
    """broker-a's slave (brokerId 1), on the cluster's loop."""
    config, store = broker_configs(tmp_path / "slave", cluster.ns, broker_id=1,
                                   broker_role=BrokerRole.SLAVE)

    async def start() -> BrokerController:
        broker = BrokerController(config, store)
        await broker.start()
        return broker

    broker = cluster.call(start())
    try:
        yield broker
    finally:
        cluster.call(broker.stop())


def test_update_topic_on_a_slave_is_a_usage_error_naming_the_master(
        cluster: BackgroundCluster, slave: BrokerController) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-b", slave.addr, "-t", "T", "--yes")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert cluster.broker_addr in result.stderr and "slave" in result.stderr
    assert "plan" not in result.stderr  # refused before any plan


def test_send_during_an_outage_is_unreachable(cluster: BackgroundCluster,
                                              slave: BrokerController) -> None:
    cluster.create_topic("Bulk", queues=2)
    assert cluster.broker is not None
    cluster.call(cluster.broker.stop())  # the master of broker-a is down; its slave is not
    result = invoke("sendMessage", "-t", "Bulk", "-p", "x", "-n", cluster.ns)
    assert result.exit_code == ExitCode.UNREACHABLE, result.stderr
    assert "broker-a" in result.stderr and "master" in result.stderr
    assert "haStatus" in result.stderr or "failover" in result.stderr  # what to check


def test_send_to_a_topic_that_forbids_writing_is_rejected(cluster: BackgroundCluster) -> None:
    cluster.create_topic("ReadOnly", queues=1)
    perm = invoke("updateTopicPerm", "-t", "ReadOnly", "-c", "DefaultCluster", "-p", "4",
                  "-n", cluster.ns, "--yes")
    assert perm.exit_code == 0, perm.stderr
    result = invoke("sendMessage", "-t", "ReadOnly", "-p", "x", "-n", cluster.ns)
    assert result.exit_code == ExitCode.REJECTED, result.stderr
    assert "updateTopicPerm" in result.stderr


@pytest.mark.parametrize("command", ["consumerProgress", "consumerConnection"])
def test_unknown_group_does_not_exist_on_any_broker(cluster: BackgroundCluster,
                                                    command: str) -> None:
    result = invoke(command, "-g", "no-such-group", "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND, result.stderr
    assert "group 'no-such-group' does not exist on any broker" in result.stderr
    assert "%RETRY%" not in result.stderr


def test_query_msg_by_id_with_no_message_at_the_offset(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    sent = cluster.send("Orders", b"one")
    nowhere = sent.offset_msg_id[:-16] + f"{10**9:016X}"
    result = invoke("queryMsgById", "-i", nowhere, "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND, result.stderr
    assert "no message at" in result.stderr


@pytest.mark.parametrize("args", [
    ("queryMsgByOffset", "-b", "broker-a", "-i", "99", "-o", "0"),
    ("queryMsgByOffset", "-b", "broker-a", "-i", "-1", "-o", "0"),
    ("printMsgByQueue", "-a", "broker-a", "-i", "42"),
    ("queryCq", "-q", "77", "-i", "0"),
])
def test_queue_ids_are_checked_against_the_route(cluster: BackgroundCluster,
                                                 args: tuple[str, ...]) -> None:
    cluster.create_topic("DemoOrders", queues=4)
    result = invoke(*args, "-t", "DemoOrders", "-n", cluster.ns)
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "0..3" in result.stderr


@pytest.mark.parametrize("flag", ["-r", "-w"])
def test_update_topic_caps_the_queue_numbers(cluster: BackgroundCluster, flag: str) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Huge",
                    flag, "100000", "--yes")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert str(QUEUE_NUMS_MAX) in result.stderr
    ok = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Huge",
                flag, str(QUEUE_NUMS_MAX), "--yes")
    assert ok.exit_code == 0, ok.stderr


@pytest.fixture
def http_server() -> Iterator[str]:
    """A local server that answers every request with an HTTP error (a wrong -n)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def run_mqadmin(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "MQADMIN_HOME": str(tmp_path)})


def test_client_log_records_stay_off_the_terminal(tmp_path: Path, http_server: str) -> None:
    quiet = run_mqadmin(tmp_path, "clusterList", "-n", http_server)
    assert quiet.returncode != 0
    assert quiet.stderr.startswith("mqadmin: error:"), quiet.stderr
    assert "closing connection" not in quiet.stderr and "WARNING" not in quiet.stderr
    loud = run_mqadmin(tmp_path, "clusterList", "-n", http_server, "--debug")
    assert "closing connection" in loud.stderr  # --debug shows the log records


def test_consumer_progress_tps_keeps_two_decimals(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.consumer_online("Readers", ("Orders",))
    cluster.commit("Readers", "Orders", 0, 0)
    assert cluster.broker is not None
    stats = cluster.broker.state.stats
    now = [stats.clock()]
    stats.clock = lambda: now[0]  # the broker's statistics on a manual clock

    async def pulled() -> None:  # 3 messages pulled over a minute: 0.05 a second
        stats.on_get("Readers", "Orders", 0, 0)
        stats.sample()
        stats.on_get("Readers", "Orders", 3, 300)
        now[0] += 60
    cluster.call(pulled())
    rows = {r["group"]: r for r in json_rows("consumerProgress", "-n", cluster.ns)}
    assert rows["Readers"]["tps"] == pytest.approx(0.05)


def test_request_code_not_supported_by_a_broker_has_a_broker_hint(
        cluster: BackgroundCluster) -> None:
    async def unknown_request() -> BaseException:
        assert cluster.client is not None
        try:
            await BrokerAdmin(cluster.client)._call(cluster.broker_addr, 4321)
        except RequestCodeNotSupportedError as exc:
            return exc
        raise AssertionError("the broker answered an unknown request code")

    exc = cluster.call(unknown_request())
    assert exit_code_for(exc) == ExitCode.REJECTED
    message = message_for(exc)
    assert "name server" not in message and "broker" in message




def test_send_failures_of_the_client_library_map_to_outage_or_rejection() -> None:
    """The exit codes hold for sends through engine.client's producer too."""
    down = RemotingConnectError("connection refused")
    outage = SendFailedError("Send [2] times, still failed", [
        ("broker-a", UnreachableError([("127.0.0.1:1", down)], role="broker")),
        ("broker-b", BrokerNotFoundError("broker-b"))])
    assert exit_code_for(outage) == ExitCode.UNREACHABLE
    assert "haStatus" in message_for(outage)
    refused = SendFailedError("Send [1] times, still failed", [
        ("broker-a", NoPermissionError(16, "the topic[T] sending message is forbidden"))])
    assert exit_code_for(refused) == ExitCode.REJECTED
    assert exit_code_for(NoRouteError("T")) == ExitCode.NOT_FOUND
