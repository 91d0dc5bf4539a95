"""The console against an Apache RocketMQ 4.9.8 master and slave (opt-in: APACHE_RMQ_HOME):
what only Apache shows, such as a broker without 5.x's HA status request."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine.client import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from engine.client.admin.cluster import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.ha import legacy as ha_legacy
from mqadmin.tui.data.access import ACL_V1_ONLY, AccessView, read_access
from mqadmin.tui.data.cluster import read_cluster
from mqadmin.tui.data.groups import read_groups
from mqadmin.tui.data.lag import kept_sampling
from tests.mqadmin.apache_cluster import BROKER, ApacheCluster, apache, needs_apache
from tests.mqadmin.cli import invoke, json_rows

pytestmark = needs_apache
__all__ = ["apache"]  # the fixture, imported for the tests


def test_ha_status_of_a_4x_pair_is_derived_from_offsets(apache: ApacheCluster) -> None:
    rows = json_rows("haStatus", "-n", apache.ns)
    by_addr = {r["addr"]: r for r in rows}
    assert set(by_addr) == {apache.master, apache.slave}
    master, slave = by_addr[apache.master], by_addr[apache.slave]
    assert (master["role"], master["peer"], master["writable"]) == (
        "ASYNC_MASTER", apache.slave, True)
    assert (slave["role"], slave["peer"], slave["writable"]) == ("SLAVE", apache.master, False)
    assert slave["peerOffset"] == master["maxOffset"]
    assert slave["behindBytes"] == max(0, master["maxOffset"] - slave["maxOffset"])
    for row in rows:  # what 4.x cannot tell is not shown as 0
        assert row["note"] == ha_legacy.DERIVED_NOTE
        assert row["epoch"] is None and row["connectionAgeMs"] is None
        assert not str(row["role"]).startswith("unreachable")


def test_switchover_of_a_4x_pair_is_refused_before_any_step(apache: ApacheCluster) -> None:
    result = invoke("switchover", "-b", BROKER, "-n", apache.ns, "--yes")
    assert result.exit_code == ExitCode.ERROR, result.stderr
    assert "Apache 4.x" in result.stderr and "brokerRole" in result.stderr


def test_dashboard_cluster_shows_the_4x_roles(apache: ApacheCluster) -> None:
    async def read() -> dict[str, dict[str, object]]:
        async with MQAdmin(apache.ns) as admin:
            view = await read_cluster(admin)
        return {str(r["addr"]): r for r in view.brokers}

    rows = asyncio.run(read())
    assert (rows[apache.master]["role"], rows[apache.master]["replication"]) == (
        "ASYNC_MASTER", "1 slave(s)")
    assert rows[apache.slave]["role"] == "SLAVE"
    assert rows[apache.master]["epoch"] is None


def test_dashboard_access_says_a_4x_broker_keeps_acl_1(apache: ApacheCluster) -> None:
    async def read() -> AccessView:
        async with MQAdmin(apache.ns) as admin:
            return await read_access(admin)

    view = asyncio.run(read())
    assert (view.users, view.rules) == ([], [])
    assert view.failures == sorted([f"{apache.master}: {ACL_V1_ONLY}",
                                    f"{apache.slave}: {ACL_V1_ONLY}"])


def test_acl_1_version_of_a_broker_with_acl_off_says_so(apache: ApacheCluster) -> None:
    """4.9.8 with aclEnable=false never answers ACL requests (a NullPointerException in the
    broker): that is said, not 'unreachable, check that the broker is running'."""
    result = invoke("clusterAclConfigVersion", "-b", apache.master, "-n", apache.ns)
    assert result.exit_code == ExitCode.ERROR, result.stderr
    assert "access control off (aclEnable=false)" in result.stderr
    assert "unreachable" not in result.stderr


def test_topic_attributes_on_a_4x_broker_are_refused_before_any_change(
        apache: ApacheCluster) -> None:
    """A 4.9 broker keeps no attributes (it would take the topic and drop `-a` silently):
    updateTopic -a says so and changes nothing; without -a the same command works."""
    result = invoke("updateTopic", "-n", apache.ns, "-b", apache.master, "-t", "AttrTopic",
                    "-a", "+message.type=FIFO", "--yes")
    assert result.exit_code == ExitCode.REJECTED, result.stderr
    assert "RocketMQ 4.x" in result.stderr and "nothing was changed" in result.stderr
    assert "AttrTopic" not in {r["topic"] for r in json_rows("topicList", "-n", apache.ns)}
    result = invoke("updateTopic", "-n", apache.ns, "-b", apache.master, "-t", "AttrTopic",
                    "--yes")
    assert result.exit_code == 0, result.stderr
    [row] = [r for r in json_rows("topicConfig", "-t", "AttrTopic", "-n", apache.ns)]
    assert (row["addr"], row["writeQueueNums"], row["messageType"], row["attributes"]) == (
        apache.master, 8, None, "")
    rows = {r["topic"]: r for r in json_rows("topicList", "--attributes", "-n", apache.ns)}
    assert rows["AttrTopic"]["messageType"] is None


def test_consume_message_orderly_on_a_4x_broker_is_refused(apache: ApacheCluster) -> None:
    result = invoke("updateSubGroup", "-n", apache.ns, "-b", apache.master, "-g", "OrderlyG",
                    "-o", "true", "--yes")
    assert result.exit_code == ExitCode.REJECTED, result.stderr
    assert "RocketMQ 4.x" in result.stderr


def test_dashboard_groups_read_a_4x_push_group(apache: ApacheCluster) -> None:
    """The Consumer groups screen's read on 4.9.8: its broker-wide consume stats (4.9's
    bytes, read by the quick decoder) give the lag and the quick sampling's queues, the
    client lists the push consumer online."""
    group = "Dash4Group"

    async def read() -> list[dict[str, Any]]:
        consumer = PushConsumer(group, ClientConfig(namesrv_addr=apache.ns,
                                                    heartbeat_broker_interval=2_000))

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                     ) -> ConsumeConcurrentlyStatus:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.subscribe("Check", "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        endpoint = Endpoint([apache.ns])
        kept = kept_sampling(endpoint)
        try:
            async with MQAdmin(apache.ns) as admin:
                deadline = time.monotonic() + 60
                while True:  # the consumer commits its offset every few seconds
                    view = await read_groups(admin, endpoint, kept=kept)
                    row = next((r for r in view.rows if r["group"] == group), None)
                    if row is not None and row["queues"] and row["state"] == "ONLINE":
                        return view.rows
                    assert time.monotonic() < deadline, row
                    await asyncio.sleep(1)
        finally:
            await consumer.shutdown()

    rows = {r["group"]: r for r in asyncio.run(read())}
    row = rows[group]
    assert (row["clients"], row["lag"], row["topics"]) == (1, 0, "Check")
    assert row["kind"] == "PUSH · remoting" and row["verdict"]
