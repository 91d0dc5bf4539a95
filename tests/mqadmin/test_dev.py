"""``mqadmin dev``: real name-server, broker and traffic processes under a tmp data dir (one
`dev up` also checks the /metrics endpoints it prints); and the demo consumer walking failed
messages into its dead-letter queue."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import TopicNotExistError
from mqadmin.dev import access
from mqadmin.dev import cluster as dev
from mqadmin.dev.traffic import Counts, PoisonRule, order_consumer
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of, rows_of_any
from .conftest import BackgroundCluster


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def kill_9(pid: int, timeout: float = 60) -> None:
    """SIGKILL `pid` and return once it is dead: the signal only marks it, and on a busy
    machine it can still run (and read as running to `dev status`) for a while."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while not gone(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive {timeout} s after SIGKILL"
        time.sleep(0.02)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "dev"
    try:
        yield path
    finally:
        dev.down(path, timeout=5)  # whatever a failed test left running


def test_dev_up_twice_then_down(data_dir: Path) -> None:
    up = invoke("dev", "up", "--data-dir", str(data_dir), "-o", "json")
    assert up.exit_code == 0, up.stderr
    processes = {r["process"]: r for r in rows_of(up)}
    assert set(processes) == {"namesrv", "broker-a-n1", "broker-a-n2", "traffic", "lag"}
    assert all(r["running"] for r in processes.values())
    assert [(processes[n]["role"], processes[n]["brokerId"]) for n in ("broker-a-n1",
            "broker-a-n2")] == [("ASYNC_MASTER", 0), ("SLAVE", 1)]
    assert "NAMESRV_ADDR=" in up.stderr and "dev down" in up.stderr
    namesrv = processes["namesrv"]["addr"]
    state = dev.read_state(data_dir)
    assert state is not None and dev.grpc_endpoints(state) in up.stderr  # the 5.x endpoints

    rows = json_rows("clusterList", "--context", "dev")
    assert sorted((r["cluster"], r["brokerName"], r["brokerId"], r["addr"]) for r in rows) == [
        ("DevCluster", "broker-a", 0, processes["broker-a-n1"]["addr"]),
        ("DevCluster", "broker-a", 1, processes["broker-a-n2"]["addr"])]
    config = {r["key"]: r["value"] for r in json_rows(
        "getBrokerConfig", "-b", processes["broker-a-n2"]["addr"], "--context", "dev")}
    assert (config["brokerRole"], config["brokerId"]) == ("SLAVE", "1")
    assert config["messageDelayLevel"] == dev.DELAY_LEVELS
    # access control is on: the dev context signs as the SUPER user, secrets stay hidden
    assert config["authorizationEnabled"] == "true"
    assert config["initAuthenticationUser"] == "******"
    assert (data_dir / access.KEYS_FILE).stat().st_mode & 0o777 == 0o600
    master = processes["broker-a-n1"]["addr"]
    unsigned = invoke("getBrokerConfig", "-b", master, "-n", namesrv)
    assert unsigned.exit_code == ExitCode.REJECTED and "not signed" in unsigned.stderr
    keys = access.existing(data_dir)
    assert keys is not None
    app = {"MQADMIN_ACCESS_KEY": keys.app.access_key,
           "MQADMIN_SECRET_KEY": keys.app.secret_key}
    as_app = invoke("getBrokerConfig", "-b", master, "-n", namesrv, env=app)
    assert as_app.exit_code == ExitCode.REJECTED and "no rule allows" in as_app.stderr
    rules = json_rows("listAcl", "-s", keys.app.access_key, "-b", master, "--context", "dev")
    assert {r["resource"] for r in rules} == {f"Topic:{t}" for t in dev.DEMO_TOPICS} | {
        f"Group:{g}" for g in dev.DEMO_GROUPS} | {"Topic:RMQ_SYS_TRACE_TOPIC"}  # demo traces
    deadline = time.monotonic() + 30  # the demo traffic (another process) signs as demo-app
    while time.monotonic() < deadline:
        stats = json_rows("topicStatus", "-t", "DemoOrders", "--context", "dev")
        if sum(r["maxOffset"] for r in stats) > 0:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the demo traffic sent nothing within 30 s")
    topics = {r["topic"] for r in json_rows("topicList", "-n", namesrv)}
    assert set(dev.DEMO_TOPICS) <= topics
    # each broker's gRPC proxy routes the demo topic for the demo app (signed, 5.x style)
    for endpoint in dev.grpc_endpoints(state).split(";"):
        assert grpc_route_status(endpoint, keys.app.access_key, keys.app.secret_key) == "OK"
    # the demo clients trace: the first order's Pub record is in the trace topic
    first = json_rows("printMsg", "-t", "DemoOrders", "--context", "dev", "--limit", "1")[0]
    while time.monotonic() < deadline:
        traced = invoke("queryMsgTraceById", "-i", first["msgId"], "--context", "dev",
                        "-o", "json")
        if traced.exit_code == 0:
            break
        time.sleep(0.2)
    assert traced.exit_code == 0, traced.stderr
    assert "Pub" in {r["type"] for r in json.loads(traced.stdout)}

    urls = assert_metrics_served(up.stderr, data_dir)

    again = invoke("dev", "up", "--data-dir", str(data_dir), "-o", "json")
    assert again.exit_code == 0 and "already running" in again.stderr
    assert {r["process"]: r["pid"] for r in rows_of(again)} == {
        n: r["pid"] for n, r in processes.items()}
    assert all(url in again.stderr for url in urls.values())  # still printed

    # dev down's own timeout: the demo traffic stops on SIGTERM (it is not SIGKILLed)
    down = invoke("dev", "down", "--data-dir", str(data_dir), "-o", "json")
    assert down.exit_code == 0, down.stderr
    assert [(r["process"], r["result"]) for r in rows_of(down)] == [
        ("lag", "stopped"), ("traffic", "stopped"), ("broker-a-n2", "stopped"),
        ("broker-a-n1", "stopped"), ("namesrv", "stopped")]
    assert all(gone(r["pid"]) for r in processes.values())
    assert not (data_dir / dev.STATE_FILE).exists()
    assert invoke("clusterList", "-n", namesrv).exit_code == ExitCode.UNREACHABLE
    assert "nothing runs" in invoke("dev", "down", "--data-dir", str(data_dir)).stderr


def assert_metrics_served(printed: str, data_dir: Path) -> dict[str, str]:
    """`dev up`'s /metrics endpoints: the brokers' configs ask for Apache's PROM exporter
    on a port of their own, the lag collector serves its metrics, `up` prints both (in
    `printed`, its stderr).  Returns process name -> URL."""
    state = dev.read_state(data_dir.resolve())
    assert state is not None
    urls = dev.metrics_urls(state)
    assert set(urls) == {"broker-a-n1", "broker-a-n2", "lag"}
    assert len(set(urls.values())) == 3
    for name, url in urls.items():
        assert f"Prometheus:     {url}  ({name})" in printed
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
    return urls


def grpc_route_status(endpoint: str, access_key: str, secret_key: str) -> str:
    """QueryRoute of DemoOrders through a proxy, signed as the official 5.x client signs."""
    import grpc

    from engine.proxy.v2 import definition_pb2 as pb
    from engine.proxy.v2 import service_pb2 as spb
    from engine.proxy.v2 import service_pb2_grpc
    from tests.proxy.official import ClientConfiguration, Credentials, Signature

    config = ClientConfiguration(endpoint, Credentials(access_key, secret_key))
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        answer = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="DemoOrders")),
                                 metadata=Signature.metadata(config, "dev-test"), timeout=10)
    return str(pb.Code.Name(answer.status.code))


def status_of(data_dir: Path) -> tuple[int, dict[str, dict[str, Any]], str]:
    result = invoke("dev", "status", "--data-dir", str(data_dir), "-o", "json")
    return (result.exit_code, {r["process"]: r for r in rows_of_any(result)},
            result.stderr)


def test_dev_up_restarts_only_what_is_dead(data_dir: Path) -> None:
    first = invoke("dev", "up", "--data-dir", str(data_dir), "--no-traffic", "--open",
                   "-o", "json")
    assert first.exit_code == 0, first.stderr
    assert "Access control is off" in first.stderr
    assert not (data_dir / access.KEYS_FILE).exists()  # --open: no keys, unsigned is fine
    namesrv = {r["process"]: r for r in rows_of(first)}["namesrv"]["addr"]
    assert invoke("getBrokerConfig", "-c", dev.CLUSTER, "-n", namesrv).exit_code == 0
    old = {r["process"]: r["pid"] for r in rows_of(first)}
    kill_9(old["broker-a-n2"])
    code, status, err = status_of(data_dir)
    assert code == ExitCode.ERROR
    assert "broker-a-n2" in err and "not running" in err and "dev up" in err
    assert status["broker-a-n2"]["running"] is False and status["namesrv"]["running"] is True
    assert status["broker-a-n1"]["role"] == "ASYNC_MASTER"

    second = invoke("dev", "up", "--data-dir", str(data_dir), "--no-traffic", "-o", "json")
    assert second.exit_code == 0, second.stderr
    assert "restarting broker-a-n2" in second.stderr
    new = {r["process"]: r["pid"] for r in rows_of(second)}
    assert set(new) == set(old)
    assert new["namesrv"] == old["namesrv"] and new["broker-a-n1"] == old["broker-a-n1"]
    assert new["broker-a-n2"] != old["broker-a-n2"] and gone(old["broker-a-n2"])
    code, status, _ = status_of(data_dir)
    assert code == 0 and status["broker-a-n2"]["role"] == "SLAVE"
    ports = json.loads((data_dir / dev.PORTS_FILE).read_text())
    assert status["broker-a-n2"]["addr"] == f"127.0.0.1:{ports['broker-a-n2']}"  # same port
    assert invoke("dev", "down", "--data-dir", str(data_dir)).exit_code == 0
    assert all(gone(pid) for pid in new.values())
    code, _, err = status_of(data_dir)
    assert code == ExitCode.ERROR and "nothing runs" in err


def until_slave_connected(namesrv: str, timeout: float = 20) -> None:
    """Until broker-a's master replicates to a slave (an event of another process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = json_rows("haStatus", "-b", dev.BROKER, "--context", "dev")
        if any(r["brokerId"] == 0 and r.get("peer") for r in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"no slave connected within {timeout} s")


def test_dev_restart_rehearses_a_switchover(data_dir: Path) -> None:
    first = invoke("dev", "up", "--data-dir", str(data_dir), "--no-traffic", "-o", "json")
    assert first.exit_code == 0, first.stderr
    old = {r["process"]: r for r in rows_of(first)}
    namesrv = old["namesrv"]["addr"]
    until_slave_connected(namesrv)
    switched = invoke("switchover", "-b", dev.BROKER, "--context", "dev", "--yes")
    assert switched.exit_code == 0, switched.stderr
    code, status, _ = status_of(data_dir)
    assert code == 0
    assert (status["broker-a-n1"]["role"], status["broker-a-n1"]["brokerId"]) == ("SLAVE", 1)
    assert (status["broker-a-n2"]["role"], status["broker-a-n2"]["brokerId"]) == (
        "ASYNC_MASTER", 0)

    restarted = invoke("dev", "restart", "broker-a-n1", "--data-dir", str(data_dir),
                       "-o", "json")
    assert restarted.exit_code == 0, restarted.stderr
    code, status, _ = status_of(data_dir)
    assert code == 0
    assert list(status) == ["namesrv", "broker-a-n1", "broker-a-n2"]  # in start order
    assert status["broker-a-n1"]["pid"] != old["broker-a-n1"]["pid"]
    assert gone(old["broker-a-n1"]["pid"])
    assert {n: status[n]["pid"] for n in ("namesrv", "broker-a-n2")} == {
        n: old[n]["pid"] for n in ("namesrv", "broker-a-n2")}
    # it restarts in the role it last had, as the slave of the new master
    assert (status["broker-a-n1"]["role"], status["broker-a-n1"]["brokerId"]) == ("SLAVE", 1)

    # a failover: the new master dies, n1 takes over, `up` brings n2 back as its slave
    until_slave_connected(namesrv)
    kill_9(status["broker-a-n2"]["pid"])
    failed_over = invoke("failover", "-b", dev.BROKER, "--context", "dev", "--accept-loss",
                         "--yes")
    assert failed_over.exit_code == 0, failed_over.stderr
    code, status, err = status_of(data_dir)
    assert code == ExitCode.ERROR and "broker-a-n2 not running" in err
    assert status["broker-a-n1"]["role"] == "ASYNC_MASTER"
    again = invoke("dev", "up", "--data-dir", str(data_dir), "--no-traffic", "-o", "json")
    assert again.exit_code == 0, again.stderr
    code, status, _ = status_of(data_dir)
    assert code == 0
    assert (status["broker-a-n2"]["role"], status["broker-a-n2"]["brokerId"]) == ("SLAVE", 1)

    unknown = invoke("dev", "restart", "broker-b", "--data-dir", str(data_dir))
    assert unknown.exit_code == ExitCode.USAGE
    assert "broker-a-n1" in unknown.stderr  # names the processes there are


def test_demo_consumer_dead_letter_resend_consumed(short_retries: BackgroundCluster) -> None:
    """The demo's whole story: a poison order fails into the DLQ, `dlq resend` redrives it,
    and the demo consumer consumes it."""
    cluster = short_retries
    cluster.create_topic("DemoOrders", queues=1)
    cluster.create_group("demo-consumer", retry_max_times=1)
    cluster.send("DemoOrders", b"fine", keys="order-1")
    cluster.send("DemoOrders", b"poison", keys="order-7")
    counts = Counts()
    consumer = order_consumer(cluster.ns, counts, PoisonRule(times=2), max_retries=1)

    async def until(done: Callable[[MQAdmin], Awaitable[bool]]) -> None:
        async with MQAdmin(cluster.ns) as admin:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if await done(admin):
                    return
                await asyncio.sleep(0.05)  # retries come back by the clock: poll
        raise AssertionError("not within 30 s")

    async def buried(admin: MQAdmin) -> bool:
        with contextlib.suppress(TopicNotExistError):  # until the first dead letter
            stats = await admin.broker.topic_stats(cluster.broker_addr, "%DLQ%demo-consumer")
            return any(o.max_offset for o in stats.offset_table.values())
        return False

    async def redriven(admin: MQAdmin) -> bool:
        return counts.redriven == 1

    cluster.call(consumer.start())
    try:
        cluster.call(until(buried), timeout=60)
        assert (counts.failed, counts.consumed) == (2, 1)  # first delivery and one retry
        [dead] = json_rows("dlq", "show", "-g", "demo-consumer", "-n", cluster.ns)
        assert (dead["body"], dead["keys"], dead["originTopic"]) == (
            "poison", "order-7", "DemoOrders")
        assert invoke("dlq", "resend", "-g", "demo-consumer", "-n", cluster.ns,
                      "--yes").exit_code == 0
        cluster.call(until(redriven), timeout=60)
        assert counts.consumed == 2
    finally:
        cluster.call(consumer.shutdown())
