"""The reads the CLI and the dashboard share (mqadmin/operations): the brokers of a cluster to
talk to (`masters`), the clusters, each name server's listing, every group's queues from
brokerConsumeStats, groups' online clients, a group's config and how it is shown, every
topic's config per broker; against a real name server and broker."""

from __future__ import annotations

import pytest

from engine.client.admin import MQAdmin
from engine.protocol.body.route import BrokerData, ClusterInfo
from engine.protocol.body.subscription import SubscriptionGroupConfig
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.consume_stats import read_lags
from mqadmin.operations.consumer import online_consumers
from mqadmin.operations.group import group_configs, show_group
from mqadmin.operations.namesrv import cluster_listings
from mqadmin.operations.targets import clusters, masters
from mqadmin.operations.topic_attributes import topic_tables
from tests.mqadmin.conftest import BackgroundCluster

CLUSTER = "DefaultCluster"
#: broker-a with its master, broker-b with only slaves (its master is down), broker-c in
#: another cluster with none.
INFO = ClusterInfo(
    {"broker-a": BrokerData("C1", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
     "broker-b": BrokerData("C1", "broker-b", {2: "10.0.0.4:10911", 1: "10.0.0.3:10911"}),
     "broker-c": BrokerData("C2", "broker-c", {})},
    {"C1": {"broker-a", "broker-b"}, "C2": {"broker-c"}})


def test_masters_of_the_cluster_or_of_every_cluster(cluster: BackgroundCluster) -> None:
    async def read(admin: MQAdmin) -> None:
        expected = {"broker-a": cluster.broker_addr}
        assert await masters(admin) == expected
        assert await masters(admin, CLUSTER) == expected
        assert await masters(admin, CLUSTER, or_slave=True) == expected
        with pytest.raises(TargetNotFound, match=f"clusters known: {CLUSTER}"):
            await masters(admin, "NoSuchCluster")
        assert await clusters(admin) == {CLUSTER: ["broker-a"]}
    cluster.admin_call(read)


def test_masters_for_reads_fall_back_on_the_lowest_numbered_slave(
        cluster: BackgroundCluster) -> None:
    async def read(admin: MQAdmin) -> None:
        assert await masters(admin, info=INFO) == {"broker-a": "10.0.0.1:10911"}
        assert await masters(admin, info=INFO, or_slave=True) == {
            "broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.3:10911"}
        assert await masters(admin, "C1", info=INFO, or_slave=True) == {
            "broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.3:10911"}
        with pytest.raises(TargetNotFound, match="clusters known: C1, C2"):
            await masters(admin, "C2", info=INFO, or_slave=True)
    cluster.admin_call(read)


def test_each_name_servers_listing(cluster: BackgroundCluster) -> None:
    async def read(admin: MQAdmin) -> None:
        info, outcomes = await cluster_listings(admin.namesrv)
        assert set(info.broker_addr_table) == {"broker-a"}
        assert [(o.addr, o.ok) for o in outcomes] == [(cluster.ns, True)]
    cluster.admin_call(read)


def test_every_groups_queues_from_one_request_per_broker(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    for _ in range(3):
        cluster.send("Orders")
    cluster.create_group("Billing")
    cluster.commit("Billing", "Orders", 0, 1)

    async def read(admin: MQAdmin) -> None:
        found = await read_lags(admin, [cluster.broker_addr, "127.0.0.1:1"])
        assert "Billing" in found.groups
        [queue] = [q for q in found.rows if q.group == "Billing"]
        assert (queue.topic, queue.broker_name, queue.queue_id) == ("Orders", "broker-a", 0)
        assert (queue.broker_offset, queue.consumer_offset, queue.diff) == (3, 1, 2)
        assert [f.split(":")[:2] for f in found.failed] == [["127.0.0.1", "1"]]
    cluster.admin_call(read)


def test_online_consumers_of_groups(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders")
    cluster.consumer_online("Billing", ("Orders",), client_id="10.0.0.7@billing")

    async def read(admin: MQAdmin) -> None:
        found = await online_consumers(admin, ["127.0.0.1:1", cluster.broker_addr],
                                       ["Billing", "Nobody"])
        assert found["Nobody"] is None
        billing = found["Billing"]
        assert billing is not None
        assert [c.client_id for c in billing.connection_set] == ["10.0.0.7@billing"]
    cluster.admin_call(read)


def test_a_groups_config_on_each_broker_shown_in_apaches_names(
        cluster: BackgroundCluster) -> None:
    cluster.create_group("Billing", retry_max_times=3, consume_message_orderly=True)

    async def read(admin: MQAdmin) -> None:
        found = await group_configs(admin, "Billing")
        assert list(found) == [cluster.broker_addr]
        assert show_group(found[cluster.broker_addr]) == (
            "consumeEnable=true consumeFromMinEnable=true consumeBroadcastEnable=true "
            "consumeMessageOrderly=true retryQueueNums=1 retryMaxTimes=3 brokerId=0 "
            "whichBrokerWhenConsumeSlowly=1 notifyConsumerIdsChangedEnable=true")
        assert await group_configs(admin, "Nobody") == {cluster.broker_addr: None}
    cluster.admin_call(read)


def test_a_group_config_shows_its_attributes_and_absence() -> None:
    config = SubscriptionGroupConfig("G", attributes={"b": "2", "a": "1"})
    assert show_group(config).endswith(
        "consumeMessageOrderly=false retryQueueNums=1 retryMaxTimes=16 brokerId=0 "
        "whichBrokerWhenConsumeSlowly=1 notifyConsumerIdsChangedEnable=true attributes=a=1,b=2")
    assert show_group(None) == "(absent)"


def test_every_topics_config_per_broker(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=2)

    async def read(admin: MQAdmin) -> None:
        ok, away = await topic_tables(admin, [cluster.broker_addr, "127.0.0.1:1"])
        assert ok.value is not None and ok.value["Orders"].read_queue_nums == 2
        assert away.value is None and away.error is not None
    cluster.admin_call(read)
