"""`MQAdmin`: cluster-wide operations against real name servers and a broker."""

from __future__ import annotations

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.cluster import MQAdmin, merge_consume_stats, select_addr
from engine.client.core.errors import ConsumerNotOnlineError, GroupNotFoundError, TopicNotExistError
from engine.client.core.namesrv import ServerOutcome
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.admin import ConsumeStats, OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import BrokerData
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from tests.conftest import addr_of

from .consumer import FakeConsumer


async def test_topic_created_on_the_cluster_then_deleted_everywhere(
        namesrv: NamesrvController, namesrv2: NamesrvController,
        broker: BrokerController) -> None:
    async with MQAdmin([addr_of(namesrv), addr_of(namesrv2)]) as admin:
        assert await admin.master_addrs("DefaultCluster") == {"broker-a": broker.addr}
        assert await admin.master_addrs("NoSuchCluster") == {}
        assert await admin.create_topic_on_cluster("NoSuchCluster", TopicConfig("T")) == []

        [outcome] = await admin.create_topic_on_cluster("DefaultCluster",
                                                        TopicConfig("ClusterTopic", 2, 2))
        assert (outcome.addr, outcome.ok) == (broker.addr, True)
        await broker.registration.register_all()
        for ns in (namesrv, namesrv2):
            route = await admin.namesrv.topic_route("ClusterTopic", addr=addr_of(ns))
            assert [q.write_queue_nums for q in route.queue_datas] == [2]

        deletion = await admin.delete_topic("ClusterTopic", cluster="DefaultCluster")
        assert deletion.ok and [o.addr for o in deletion.brokers] == [broker.addr]
        assert len(deletion.namesrvs) == 2
        for ns in (namesrv, namesrv2):
            with pytest.raises(TopicNotExistError):
                await admin.namesrv.topic_route("ClusterTopic", addr=addr_of(ns))
        topics = await admin.broker.all_topic_config(broker.addr)
        assert "ClusterTopic" not in topics.topic_config_table


async def test_group_created_on_the_cluster(namesrv: NamesrvController,
                                            broker: BrokerController) -> None:
    async with MQAdmin(addr_of(namesrv)) as admin:
        config = SubscriptionGroupConfig("ClusterGroup", retry_max_times=2)
        [outcome] = await admin.create_group_on_cluster("DefaultCluster", config)
        assert outcome.ok
        groups = await admin.broker.all_group_config(broker.addr)
        assert groups.subscription_group_table["ClusterGroup"] == config


async def test_consume_stats_and_connections_across_the_route(
        namesrv: NamesrvController, broker: BrokerController) -> None:
    async with MQAdmin(addr_of(namesrv)) as admin:
        with pytest.raises(GroupNotFoundError):  # no broker knows CG
            await admin.consumer_connections("CG")
        with pytest.raises(GroupNotFoundError):
            await admin.consume_stats("CG")
        await admin.broker.create_topic(broker.addr, TopicConfig("Consumed", 2, 2))
        await admin.broker.update_consumer_offset(broker.addr, "CG", "Consumed", 1, 0)
        async with FakeConsumer(broker.addr, "C1", "CG", ("Consumed",)):
            await broker.registration.register_all()  # publishes %RETRY%CG's route
            connections = await admin.consumer_connections("CG")
            assert [c.client_id for c in connections.connection_set] == ["C1"]

            outcomes = await admin.consume_stats("CG")
            assert [o.addr for o in outcomes] == [broker.addr]
            merged = merge_consume_stats(outcomes)
            assert set(merged.offset_table) == {MessageQueue("Consumed", "broker-a", 0),
                                                MessageQueue("Consumed", "broker-a", 1)}
            by_topic = merge_consume_stats(await admin.consume_stats("CG", "Consumed"))
            assert by_topic == merged


def test_merge_and_address_selection() -> None:
    a, b = MessageQueue("T", "a", 0), MessageQueue("T", "b", 0)
    outcomes = [ServerOutcome("x", ConsumeStats({b: OffsetWrapper(2, 1, 0)}, 1.0)),
                ServerOutcome("y", error=ConsumerNotOnlineError(206, "off", "y")),
                ServerOutcome("z", ConsumeStats({a: OffsetWrapper(5, 5, 0)}, 0.5))]
    merged = merge_consume_stats(outcomes)
    assert list(merged.offset_table) == [a, b] and merged.consume_tps == 1.5
    assert select_addr(BrokerData("c", "b", {0: "m", 1: "s1"})) == "m"
    assert select_addr(BrokerData("c", "b", {2: "s2", 1: "s1"})) == "s1"
    assert select_addr(BrokerData("c", "b")) is None
