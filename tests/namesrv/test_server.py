"""The name server over real sockets: KV, config, admin requests, broker liveness."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.remoting.client import RemotingClient
from engine.remoting.connection import Connection
from tests.clock import ManualClock
from tests.conftest import addr_of, namesrv_config

BROKER = "10.0.0.1:10911"


def register(name: str = "broker-a", addr: str = BROKER, broker_id: int = 0, counter: int = 1,
             topics: tuple[str, ...] = ("TopicTest",), cluster: str = "DefaultCluster"
             ) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4) for t in topics},
                                          DataVersion(1_700_000_000_000, counter))
    return request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": addr, "clusterName": cluster,
        "haServerAddr": "10.0.0.1:10912", "brokerId": str(broker_id),
    }, RegisterBrokerBody(wrapper).encode())


async def call(client: RemotingClient, ns: NamesrvController, code: int,
               ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return await client.invoke(addr_of(ns), request(code, ext, body))


async def test_kv_config_round_trip_and_persistence(namesrv: NamesrvController,
                                                    client: RemotingClient,
                                                    tmp_path: Path) -> None:
    kv = {"namespace": "NS", "key": "k"}
    missing = await call(client, namesrv, RequestCode.GET_KV_CONFIG, kv)
    assert (missing.code, missing.remark, missing.ext_fields) == (
        ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NS Key: k", {})
    listed = await call(client, namesrv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert (listed.code, listed.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "No config item, Namespace: NS")

    put = await call(client, namesrv, RequestCode.PUT_KV_CONFIG, {**kv, "value": "v1"})
    assert (put.code, put.ext_fields) == (0, None)
    got = await call(client, namesrv, RequestCode.GET_KV_CONFIG, kv)
    assert (got.code, got.ext_fields) == (0, {"value": "v1"})
    listed = await call(client, namesrv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert listed.body == b'{"table":{"k":"v1"}}'
    path = tmp_path / "namesrv" / "kvConfig.json"
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"k": "v1"}}}

    await call(client, namesrv, RequestCode.DELETE_KV_CONFIG, kv)
    assert json.loads(path.read_text()) == {"configTable": {"NS": {}}}
    gone = await call(client, namesrv, RequestCode.GET_KV_CONFIG, kv)
    assert gone.code == ResponseCode.QUERY_NOT_FOUND
    bad = await call(client, namesrv, RequestCode.PUT_KV_CONFIG, {"namespace": "NS"})
    assert bad.code == ResponseCode.SYSTEM_ERROR


async def test_kv_config_reloaded_on_start(tmp_path: Path, client: RemotingClient) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicTest":"broker-a:4"}}}')
    ns = NamesrvController(namesrv_config(tmp_path, order_message_enable=True))
    await ns.start()
    try:
        reg = await client.invoke(addr_of(ns), register())
        assert reg.body == b'{"table":{"TopicTest":"broker-a:4"}}'
        route = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert fastjson.loads(route.body or b"")["orderTopicConf"] == "broker-a:4"
    finally:
        await ns.stop()


async def test_namesrv_config_get_and_update(namesrv: NamesrvController, client: RemotingClient,
                                             tmp_path: Path) -> None:
    got = await call(client, namesrv, RequestCode.GET_NAMESRV_CONFIG)
    text = (got.body or b"").decode()
    assert "orderMessageEnable=false\n" in text and "listenPort=0\n" in text
    for key in ("kvConfigPath", "configStorePath"):
        denied = await call(client, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG,
                            body=f"{key}=/tmp/x\n".encode())
        assert (denied.code, denied.remark) == (ResponseCode.NO_PERMISSION,
                                                "Can not update config path")
    bad = await call(client, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG,
                     body=b"orderMessageEnable=maybe\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "orderMessageEnable" in (bad.remark or "")
    ok = await call(client, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG,
                    body=b"orderMessageEnable=true\nnoSuchKey=1\n")
    assert ok.code == ResponseCode.SUCCESS
    assert namesrv.state.config.order_message_enable is True
    stored = (tmp_path / "namesrv" / "namesrv.properties").read_text()
    assert "orderMessageEnable=true\n" in stored and "noSuchKey" not in stored


async def test_admin_requests(namesrv: NamesrvController, client: RemotingClient) -> None:
    await client.invoke(addr_of(namesrv), register(topics=("T1", "T2")))
    await client.invoke(addr_of(namesrv), register("broker-b", "10.0.0.2:10911", cluster="C2",
                                                   topics=("T2",)))
    wipe = await call(client, namesrv, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                      {"brokerName": "broker-a"})
    assert (wipe.code, wipe.ext_fields) == (0, {"wipeTopicCount": "2"})
    add = await call(client, namesrv, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                     {"brokerName": "broker-a"})
    assert add.ext_fields == {"addTopicCount": "2"}

    topics = await call(client, namesrv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert topics.body == b'{"topicList":["T1","T2"]}'
    by_cluster = await call(client, namesrv, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C2"})
    assert by_cluster.body == b'{"topicList":["T2"]}'
    system = await call(client, namesrv, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert system.body == (b'{"brokerAddr":"10.0.0.1:10911","topicList":'
                           b'["C2","DefaultCluster","broker-a","broker-b"]}')
    for code in (RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                 RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
        assert (await call(client, namesrv, code)).body == b'{"topicList":[]}'

    deleted = await call(client, namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV,
                         {"topic": "T2", "clusterName": "C2"})
    assert deleted.code == 0 and set(namesrv.state.routes.topics["T2"]) == {"broker-a"}
    await call(client, namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T1"})
    assert "T1" not in namesrv.state.routes.topics

    header = {"brokerName": "broker-a", "brokerAddr": BROKER, "clusterName": "DefaultCluster",
              "brokerId": "0"}
    same = await call(client, namesrv, RequestCode.QUERY_DATA_VERSION, header,
                      b'{"counter":1,"timestamp":1700000000000}')
    assert same.ext_fields == {"changed": "false"}
    assert same.body == b'{"counter":1,"timestamp":1700000000000}'
    newer = await call(client, namesrv, RequestCode.QUERY_DATA_VERSION, header,
                       b'{"counter":2,"timestamp":1700000000000}')
    assert newer.ext_fields == {"changed": "true"}

    gone = await call(client, namesrv, RequestCode.UNREGISTER_BROKER, header)
    assert (gone.code, gone.ext_fields) == (0, None)
    assert "broker-a" not in namesrv.state.routes.brokers


async def test_closed_broker_connection_drops_the_broker(namesrv: NamesrvController) -> None:
    closed: asyncio.Queue[Connection] = asyncio.Queue()
    namesrv.connection_closed_listeners.append(closed.put_nowait)
    broker = RemotingClient()
    try:
        await broker.invoke(addr_of(namesrv), register())
        assert "TopicTest" in namesrv.state.routes.topics
    finally:
        await broker.close()
    await asyncio.wait_for(closed.get(), 5)
    assert namesrv.state.routes.brokers == {} and namesrv.state.routes.topics == {}


async def test_expiry_scan_drops_silent_broker_and_closes_it(namesrv: NamesrvController,
                                                             clock: ManualClock) -> None:
    closed: asyncio.Queue[Connection] = asyncio.Queue()
    namesrv.connection_closed_listeners.append(closed.put_nowait)
    broker = RemotingClient()
    try:
        await broker.invoke(addr_of(namesrv), register())
        clock.now += 120_000
        assert namesrv.scanner.scan_once() == 0
        clock.now += 1
        assert namesrv.scanner.scan_once() == 1
        assert namesrv.state.routes.topics == {}
        await asyncio.wait_for(closed.get(), 5)  # the broker's connection was closed
    finally:
        await broker.close()
