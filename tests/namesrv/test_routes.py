"""Route tables without sockets: registration, expiry (injected clock), queries, admin ops."""

from __future__ import annotations

import pytest

from engine.namesrv.routes import RouteTable
from engine.protocol.body.route import BrokerData, QueueData, TopicList
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.perm import PERM_READ, PERM_RW, PERM_WRITE

A0, A1, B0 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def wrapper(*topics: TopicConfig, counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({t.topic_name: t for t in topics},
                                       DataVersion(1_700_000_000_000, counter))


def topic(name: str, queues: int = 4, perm: int = PERM_RW, sys_flag: int = 0) -> TopicConfig:
    return TopicConfig(name, queues, queues, perm, topic_sys_flag=sys_flag)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def table(clock: Clock) -> RouteTable:
    return RouteTable(clock)


def register(table: RouteTable, addr: str = A0, name: str = "broker-a", broker_id: int = 0,
             *topics: TopicConfig, counter: int = 1, cluster: str = "DefaultCluster",
             conn: object | None = None) -> tuple[str | None, str | None]:
    ha = addr.replace("10911", "10912")
    result = table.register_broker(cluster, addr, name, broker_id, ha,
                                   wrapper(*topics, counter=counter), [], conn)
    return result.master_addr, result.ha_server_addr


def test_master_registration_creates_routes(table: RouteTable) -> None:
    assert register(table, A0, "broker-a", 0, topic("T")) == (None, None)
    route = table.pickup_route("T")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, PERM_RW, 0)]
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: A0})]
    assert route.filter_server_table == {}
    assert table.pickup_route("nope") is None


def test_slave_learns_master_and_does_not_write_topics(table: RouteTable) -> None:
    assert register(table, A1, "broker-a", 1, topic("S")) == (None, None)  # master unknown
    assert table.pickup_route("S") is None
    register(table, A0, "broker-a", 0, topic("T"))
    assert register(table, A1, "broker-a", 1, topic("S")) == (A0, "10.0.0.1:10912")
    route = table.pickup_route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: A0, 1: A1}
    assert table.pickup_route("S") is None


def test_topics_update_only_on_new_data_version(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T", 4), counter=1)
    register(table, A0, "broker-a", 0, topic("T", 8), counter=1)  # same version: ignored
    assert table.topics["T"]["broker-a"].read_queue_nums == 4
    register(table, A0, "broker-a", 0, topic("T", 8), counter=2)
    assert table.topics["T"]["broker-a"].read_queue_nums == 8


def test_same_address_under_new_id_replaces_old_entry(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T"))
    register(table, A1, "broker-a", 1)
    table.unregister_broker("DefaultCluster", A0, "broker-a", 0)  # master gone
    register(table, A1, "broker-a", 0, topic("T"))  # slave promoted on the same address
    assert table.brokers["broker-a"].addrs == {0: A1}
    route = table.pickup_route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: A1}


def test_wiped_write_perm_survives_unchanged_reregistration(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T"), topic("U"), counter=1)
    register(table, B0, "broker-b", 0, topic("T"), counter=1)
    assert table.wipe_write_perm("broker-a") == 2
    assert table.topics["T"]["broker-a"].perm == PERM_READ
    assert table.topics["T"]["broker-b"].perm == PERM_RW
    register(table, A0, "broker-a", 0, topic("T"), topic("U"), counter=1)
    assert table.topics["T"]["broker-a"].perm == PERM_READ  # 4.9.7: no rewrite
    assert table.add_write_perm("broker-a") == 2
    assert table.topics["U"]["broker-a"].perm == PERM_READ | PERM_WRITE
    assert table.wipe_write_perm("nobody") == 0
    table.wipe_write_perm("broker-a")
    register(table, A0, "broker-a", 0, topic("T"), topic("U"), counter=2)
    assert table.topics["T"]["broker-a"].perm == PERM_RW  # a new version rewrites it


def test_expiry_removes_silent_brokers_with_their_routes(table: RouteTable, clock: Clock) -> None:
    conn = object()
    register(table, A0, "broker-a", 0, topic("T"), topic("A-only"), conn=conn)
    register(table, B0, "broker-b", 0, topic("T"), cluster="Other")
    clock.now += 60_000
    register(table, B0, "broker-b", 0, topic("T"), cluster="Other")  # heartbeat
    clock.now += 60_000
    assert table.scan_not_active() == []  # exactly 120 s is not yet expired
    clock.now += 1
    expired = table.scan_not_active()
    assert [(e.addr, e.conn_key) for e in expired] == [(A0, conn)]
    assert "broker-a" not in table.brokers
    assert "DefaultCluster" not in table.clusters
    assert "A-only" not in table.topics
    route = table.pickup_route("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    clock.now += 120_001
    assert [e.addr for e in table.scan_not_active()] == [B0]
    assert table.topics == {} and table.clusters == {} and table.live == {}


def test_query_data_version_touch_keeps_broker_alive(table: RouteTable, clock: Clock) -> None:
    register(table, A0, "broker-a", 0, topic("T"), counter=3)
    assert not table.is_data_version_changed(A0, DataVersion(1_700_000_000_000, 3))
    assert table.is_data_version_changed(A0, DataVersion(1_700_000_000_000, 4))
    assert table.is_data_version_changed(B0, DataVersion())
    clock.now += 100_000
    table.touch(A0)
    clock.now += 100_000
    assert table.scan_not_active() == []


def test_connection_close_removes_the_broker_registered_on_it(table: RouteTable) -> None:
    master_conn, slave_conn, client_conn = object(), object(), object()
    register(table, A0, "broker-a", 0, topic("T"), conn=master_conn)
    register(table, A1, "broker-a", 1, conn=slave_conn)
    table.on_connection_closed("127.0.0.1:50000", client_conn)  # not a broker: no change
    assert set(table.live) == {A0, A1}
    table.on_connection_closed("127.0.0.1:50001", slave_conn)
    assert table.brokers["broker-a"].addrs == {0: A0}
    assert "T" in table.topics  # a slave leaving keeps the routes
    table.on_connection_closed("127.0.0.1:50002", master_conn)
    assert table.brokers == {} and table.topics == {} and table.clusters == {}


def test_unregister(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T"))
    register(table, A1, "broker-a", 1)
    table.unregister_broker("DefaultCluster", A1, "broker-a", 1)
    assert table.brokers["broker-a"].addrs == {0: A0} and "T" in table.topics
    table.unregister_broker("DefaultCluster", A0, "broker-a", 0)
    assert table.brokers == {} and table.topics == {} and table.clusters == {}
    table.unregister_broker("DefaultCluster", A0, "broker-a", 0)  # unknown: no error


def test_cluster_info_and_topic_lists(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T"), topic("Unit", sys_flag=1),
             topic("UnitSub", sys_flag=2), topic("Both", sys_flag=3))
    register(table, A1, "broker-a", 1)
    register(table, B0, "broker-b", 0, topic("T"), topic("Bonly"), cluster="C2")
    info = table.cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}, "C2": {"broker-b"}}
    assert info.broker_addr_table["broker-a"] == BrokerData(
        "DefaultCluster", "broker-a", {0: A0, 1: A1})
    assert table.all_topics() == TopicList(["Bonly", "Both", "T", "Unit", "UnitSub"])
    assert table.topics_by_cluster("C2") == TopicList(["Bonly", "T"])
    assert table.topics_by_cluster("unknown") == TopicList([])
    assert table.system_topics() == TopicList(
        ["C2", "DefaultCluster", "broker-a", "broker-b"], A0)
    assert table.unit_topics() == TopicList(["Both", "Unit"])
    assert table.has_unit_sub_topics() == TopicList(["Both", "UnitSub"])
    assert table.has_unit_sub_ununit_topics() == TopicList(["UnitSub"])


def test_delete_topic_whole_or_per_cluster(table: RouteTable) -> None:
    register(table, A0, "broker-a", 0, topic("T"), topic("X"))
    register(table, B0, "broker-b", 0, topic("T"), cluster="C2")
    table.delete_topic("T", "C2")
    assert set(table.topics["T"]) == {"broker-a"}
    table.delete_topic("T", "nope")
    assert "T" in table.topics
    table.delete_topic("T", "DefaultCluster")
    assert "T" not in table.topics
    table.delete_topic("X")
    assert table.topics == {}


def test_filter_servers(table: RouteTable) -> None:
    table.register_broker("DefaultCluster", A0, "broker-a", 0, "h:1", wrapper(topic("T")),
                          ["10.0.0.9:9999"], None)
    route = table.pickup_route("T")
    assert route is not None and route.filter_server_table == {A0: ["10.0.0.9:9999"]}
    table.register_broker("DefaultCluster", A0, "broker-a", 0, "h:1", wrapper(topic("T")),
                          [], None)
    route = table.pickup_route("T")
    assert route is not None and route.filter_server_table == {}
