"""The console's group commands against Apache 5.3.3 (opt-in, APACHE_RMQ5_HOME): a remoting
group (our push consumer) and a gRPC POP group (the official Python 5.x client through 5.3.3's
proxy), which Apache's own mqadmin does not find (it goes by ``%RETRY%<group>``'s route, and a
POP group on 5.3 has none).  docs/mqadmin.md's table says what differs from 4.9.8 and why."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from engine.client import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from engine.client.admin.cluster import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.operations.consumer import GRPC_NO_RUNNING_INFO
from mqadmin.tui.data.cluster import read_cluster
from mqadmin.tui.data.groups import read_groups
from mqadmin.tui.data.lag import kept_sampling
from tests.apache5 import (
    BROKER,
    CLUSTER,
    HOME,
    Apache5,
    apache5,
    needs_apache5,
    running_apache5_slave,
)
from tests.mqadmin.cli import invoke, json_rows
from tests.ports import free_port
from tests.proxy.conftest import in_thread
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

pytestmark = [needs_apache5, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]
__all__ = ["apache5"]

TOPIC = "ConsoleT5"
GRPC_GROUP = "ConsoleGrpc5"
REMOTING_GROUP = "ConsoleRemoting5"
#: 5.3.3's proxy refuses a receive with a shorter invisible duration.
MIN_INVISIBLE_S = 10


@dataclass
class Groups:
    ns: str
    grpc: SimpleConsumer
    remoting: PushConsumer
    #: the POP retry topic 5.3.3 made when a received message was not acked in time
    pop_retry: str


async def _cli(*args: str) -> list[dict[str, Any]]:
    return await in_thread(json_rows, *args)


def _apache_mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([f"{HOME}/mqadmin.sh", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "RMQ_HEAP": "-Xmx256m"}, check=False)


async def _topics(ns: str) -> set[str]:
    async with MQAdmin(ns) as admin:
        return set((await admin.namesrv.all_topics()).topic_list)


def _receive(consumer: SimpleConsumer, count: int, invisible_s: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + 90
    while len(got) < count and time.monotonic() < deadline:
        try:
            got += consumer.receive(16, invisible_s) or []
        except Exception:  # "settings is null" until the proxy has the client's settings
            time.sleep(0.5)
    assert len(got) >= count, f"received {len(got)} of {count}"
    return got


def _send(endpoint: str, n: int) -> None:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    producer.startup()
    try:
        for i in range(n):
            msg = Message()
            msg.topic, msg.body = TOPIC, f"m{i}".encode()
            producer.send(msg)
    finally:
        producer.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def groups(apache5: Apache5) -> AsyncIterator[Groups]:
    made = await in_thread(invoke, "updateTopic", "-n", apache5.ns, "-c", CLUSTER,
                                   "-t", TOPIC, "-r", "2", "-w", "2", "-a",
                                   "+message.type=NORMAL", "--yes")
    assert made.exit_code == 0, made.stderr
    await in_thread(_send, apache5.grpc, 4)
    remoting = PushConsumer(REMOTING_GROUP, ClientConfig(namesrv_addr=apache5.ns,
                                                         heartbeat_broker_interval=2_000))

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    remoting.subscribe(TOPIC, "*")
    remoting.register_concurrently(listener)
    await remoting.start()
    grpc = SimpleConsumer(ClientConfiguration(apache5.grpc, Credentials()), GRPC_GROUP,
                          {TOPIC: FilterExpression("*")}, await_duration=2)
    await in_thread(grpc.startup)
    try:
        # None acked within the invisible time: 5.3.3's revive puts them in the group's POP
        # retry topic, from where they come again.
        first = await in_thread(_receive, grpc, 1, MIN_INVISIBLE_S)
        again = await in_thread(_receive, grpc, 1, 60)
        for m in again:
            await in_thread(grpc.ack, m)
        assert first
        pop_retry = f"%RETRY%{GRPC_GROUP}_{TOPIC}"
        deadline = time.monotonic() + 60  # on the name server at the broker's next register
        while pop_retry not in (topics := await _topics(apache5.ns)):
            assert time.monotonic() < deadline, f"{pop_retry} never reached the name server"
            await asyncio.sleep(1)
        assert f"%RETRY%{GRPC_GROUP}" not in topics
        yield Groups(apache5.ns, grpc, remoting, pop_retry)
    finally:
        await remoting.shutdown()
        await in_thread(grpc.shutdown)


async def test_consumer_connection_of_both_groups(groups: Groups) -> None:
    (grpc,) = await _cli("consumerConnection", "-n", groups.ns, "-g", GRPC_GROUP)
    assert grpc["clientId"] == groups.grpc.client_id
    assert (grpc["language"], grpc["protocol"]) == ("PYTHON", "gRPC")  # told by its client id
    assert grpc["subscriptions"] == f"{TOPIC}:*"
    (remoting,) = await _cli("consumerConnection", "-n", groups.ns, "-g", REMOTING_GROUP)
    assert (remoting["protocol"], remoting["consumeType"]) == ("remoting", "CONSUME_PASSIVELY")
    # Apache's own mqadmin goes by %RETRY%<group>'s route: none for a POP group.
    apache = await in_thread(_apache_mqadmin, "consumerConnection", "-n", groups.ns,
                                     "-g", GRPC_GROUP)
    assert f"%RETRY%{GRPC_GROUP}" in apache.stdout + apache.stderr


async def test_consumer_progress_lists_groups_not_pop_retry_topics(groups: Groups) -> None:
    listed = {r["group"]: r for r in await _cli("consumerProgress", "-n", groups.ns)}
    assert {GRPC_GROUP, REMOTING_GROUP} <= set(listed)
    assert f"{GRPC_GROUP}_{TOPIC}" not in listed  # what Apache's consumerProgress lists
    assert listed[GRPC_GROUP]["count"] == listed[REMOTING_GROUP]["count"] == 1
    rows = await _cli("consumerProgress", "-n", groups.ns, "-g", GRPC_GROUP)
    assert {r["topic"] for r in rows[:-1]} <= {TOPIC, groups.pop_retry}
    assert TOPIC in {r["topic"] for r in rows}
    assert sum(r["brokerOffset"] for r in rows[:-1] if r["topic"] == TOPIC) == 4
    only = await _cli("consumerProgress", "-n", groups.ns, "-g", GRPC_GROUP, "-t", TOPIC)
    assert {r["topic"] for r in only[:-1]} == {TOPIC}
    assert all(isinstance(r["inflight"], int) for r in only)


async def test_dashboard_groups_read_both_groups(groups: Groups) -> None:
    """The Consumer groups screen's read on 5.3.3: its broker-wide consume stats (5.3's bytes,
    read by the quick decoder) feed the lag and the quick sampling, the client lists say
    both groups are online (the gRPC one told by its client id: its clients pop, so the
    sampling reads its consume stats per group), and no POP retry topic is a group."""
    endpoint = Endpoint([groups.ns])
    kept = kept_sampling(endpoint)
    async with MQAdmin(groups.ns) as admin:
        first = await read_groups(admin, endpoint, kept=kept)
        again = await read_groups(admin, endpoint, kept=kept,
                                  previous=[str(r["group"]) for r in first.rows])
    for view in (first, again):
        rows = {r["group"]: r for r in view.rows}
        assert f"{GRPC_GROUP}_{TOPIC}" not in rows and not view.failures
        grpc, remoting = rows[GRPC_GROUP], rows[REMOTING_GROUP]
        assert (grpc["state"], remoting["state"]) == ("ONLINE", "ONLINE")
        assert grpc["kind"].endswith("gRPC") and remoting["kind"].endswith("remoting")
        assert grpc["verdict"] and remoting["verdict"] and view.source == "sampled"
        assert TOPIC in grpc["topics"].split(",")


async def test_consumer_status_does_not_wait_for_what_5_3_never_sends(groups: Groups) -> None:
    (grpc,) = await _cli("consumerStatus", "-n", groups.ns, "-g", GRPC_GROUP)
    assert grpc["error"] == GRPC_NO_RUNNING_INFO
    (remoting,) = await _cli("consumerStatus", "-n", groups.ns, "-g", REMOTING_GROUP)
    assert remoting["error"] is None
    assert remoting["queues"] == 3  # two of the topic, one of its %RETRY% topic


async def test_lag_status_judges_both_groups(groups: Groups) -> None:
    rows = {r["group"]: r for r in await _cli("lag", "status", "-n", groups.ns)}
    assert {GRPC_GROUP, REMOTING_GROUP} <= set(rows)
    assert f"{GRPC_GROUP}_{TOPIC}" not in rows


def _scrape_collector(ns: str, root: Path) -> str:
    """`lag collect --metrics-port` against the cluster: /metrics after its third cycle."""
    port = free_port()
    data = root / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin.app", "lag", "collect", "-n", ns, "--interval",
         "500ms", "--data-dir", str(data), "--metrics-host", "127.0.0.1", "--metrics-port",
         str(port), "-o", "json"],
        env={**os.environ, "MQADMIN_HOME": str(root / "home")}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        log = data / "logs" / "lag-collect.log"
        deadline = time.monotonic() + 60
        while not (log.exists() and "cycle 3:" in log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


async def test_lag_collect_metrics_carry_both_groups(groups: Groups, tmp_path: Path) -> None:
    text = await in_thread(_scrape_collector, groups.ns, tmp_path)
    for group in (GRPC_GROUP, REMOTING_GROUP):
        assert f'rocketmq_group_diff{{countOfOnlineConsumers="1",group="{group}"' in text
    assert f'group="{GRPC_GROUP}_{TOPIC}"' not in text


async def test_reset_offset_of_the_pop_group(groups: Groups) -> None:
    rows = await _cli("resetOffsetByTime", "-n", groups.ns, "-g", GRPC_GROUP, "-t", TOPIC,
                      "-s", "0", "--yes")
    assert rows and all(r["verified"] for r in rows)


async def test_delete_sub_group_takes_the_pop_retry_topic(groups: Groups) -> None:
    """Last: the gRPC group goes (its consumer first, or the proxy makes it again)."""
    await in_thread(groups.grpc.shutdown)
    result = await in_thread(invoke, "deleteSubGroup", "-n", groups.ns, "-c", CLUSTER,
                                     "-g", GRPC_GROUP, "-r", "true", "--yes")
    assert result.exit_code == 0, result.stderr
    assert groups.pop_retry not in await _topics(groups.ns)
    gone = await in_thread(invoke, "consumerConnection", "-n", groups.ns, "-g",
                                   GRPC_GROUP)
    assert gone.exit_code == 3 and "does not exist on any broker" in gone.stderr


async def test_ha_status_of_a_5_3_pair_and_no_role_change(groups: Groups, apache5: Apache5,
                                                          tmp_path: Path) -> None:
    with running_apache5_slave(apache5, tmp_path) as slave:
        deadline = time.monotonic() + 120
        while True:
            rows = await _cli("haStatus", "-n", groups.ns, "-c", CLUSTER)
            by_role = {r["role"]: r for r in rows}
            if "SLAVE" in by_role and by_role["SLAVE"]["addr"] == slave and (
                    by_role["SLAVE"]["maxOffset"] == by_role["MASTER"]["maxOffset"]):
                break
            assert time.monotonic() < deadline, rows
            await asyncio.sleep(1)
        master, replica = by_role["MASTER"], by_role["SLAVE"]
        assert (master["addr"], master["brokerId"], master["writable"]) == (
            apache5.broker, 0, True)
        assert (replica["brokerId"], replica["writable"], replica["behindBytes"]) == (1, False, 0)
        assert master["epoch"] is None and master["maxOffset"] > 0  # 5.x keeps no epoch here
        refused = await in_thread(invoke, "switchover", "-n", groups.ns, "-b", BROKER,
                                          "--yes")
        assert refused.exit_code == 1 and "controller" in refused.stderr


LAG_TOPIC = "LagT5"
LAG_GROUP = "LagPop5"
DELAY_TOPIC = "LaterT5"


def _send_to(endpoint: str, topic: str, n: int, delay_s: int = 0) -> None:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        for i in range(n):
            msg = Message()
            msg.topic, msg.body = topic, f"w{i}".encode()
            if delay_s:
                msg.delivery_timestamp = int(time.time()) + delay_s  # seconds, as 5.1.2 wants
            producer.send(msg)
    finally:
        producer.shutdown()


async def _lag_row(ns: str, group: str) -> dict[str, Any]:
    [row] = await _cli("lag", "status", "-n", ns, "-g", group)
    return row


async def test_lag_verdicts_of_a_pop_group_waiting_and_popping(groups: Groups,
                                                               apache5: Apache5) -> None:
    made = await in_thread(invoke, "updateTopic", "-n", groups.ns, "-c", CLUSTER,
                                   "-t", LAG_TOPIC, "-r", "1", "-w", "1", "-a",
                                   "+message.type=NORMAL", "--yes")
    assert made.exit_code == 0, made.stderr
    consumer = SimpleConsumer(ClientConfiguration(apache5.grpc, Credentials()), LAG_GROUP,
                              {LAG_TOPIC: FilterExpression("*")}, await_duration=2)
    await in_thread(consumer.startup)
    try:
        await in_thread(_send_to, apache5.grpc, LAG_TOPIC, 1)
        for m in await in_thread(_receive, consumer, 1, MIN_INVISIBLE_S):
            await in_thread(consumer.ack, m)  # the group has its offset now
        await in_thread(_send_to, apache5.grpc, LAG_TOPIC, 3)
        waiting = await _lag_row(groups.ns, LAG_GROUP)
        assert (waiting["lag"], waiting["ready"], waiting["inFlight"]) == (3, 3, 0)
        assert waiting["verdict"] == "UNKNOWN"  # one quick sampling cannot judge a stall
        # popped, not acked: 5.3.3 commits the offset at the pop, so nothing is behind it
        # (Apache's consumerProgress says Diff 0, Inflight 0 too); they come back through
        # the group's POP retry topic if the invisible time passes
        await in_thread(_receive, consumer, 3, 60)
        popped = await _lag_row(groups.ns, LAG_GROUP)
        assert (popped["lag"], popped["ready"], popped["inFlight"]) == (0, 0, 0)
        assert popped["verdict"] == "OK"
    finally:
        await in_thread(consumer.shutdown)


async def test_cluster_screen_counts_5_3_timers(groups: Groups, apache5: Apache5) -> None:
    made = await in_thread(invoke, "updateTopic", "-n", groups.ns, "-c", CLUSTER,
                                   "-t", DELAY_TOPIC, "-r", "1", "-w", "1", "-a",
                                   "+message.type=DELAY", "--yes")
    assert made.exit_code == 0, made.stderr
    await in_thread(_send_to, apache5.grpc, DELAY_TOPIC, 2, 3600)
    # 5.3's timerCongestNum counts POP checkpoints and acks too (revive-topic timer messages):
    # ours must say what Apache's brokerStatus says while the count holds still
    async with MQAdmin(groups.ns) as admin:
        async def timers() -> int:
            rows = (await read_cluster(admin)).brokers
            [row] = [r for r in rows if r["brokerId"] == 0]
            assert str(row["timerLag"]).endswith(" s")  # timerReadBehind: 0 s, 1 s under load
            return int(row["timers"])

        deadline = time.monotonic() + 90
        while True:
            ours = await timers()
            status = await in_thread(_apache_mqadmin, "brokerStatus", "-n", groups.ns,
                                             "-b", apache5.broker)
            apache = int(next(line.split(":")[1] for line in status.stdout.splitlines()
                              if line.startswith("timerCongestNum")))
            if ours == apache == await timers():
                break
            assert time.monotonic() < deadline, (ours, apache)
    assert ours >= 2
