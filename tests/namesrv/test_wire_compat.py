"""A registration built from the spec, then the route and cluster bodies Apache 4.9.7 returns.

Expected bytes are copied from spec/request-codes.md §5.1 / §5.2 (fastjson 1.2.69 output).
"""

from __future__ import annotations

import dataclasses
import zlib

import pytest

from engine.namesrv.controller import NamesrvController
from engine.namesrv.handlers import build_router
from engine.namesrv.handlers.broker import body_crc32
from engine.namesrv.handlers.route import browser_compatible, encode_route
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.remoting.client import RemotingClient
from tests.conftest import addr_of

MASTER, SLAVE = "192.168.1.10:10911", "192.168.1.11:10911"

# §5.8, byte for byte.
PLAIN_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
    b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
    b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest",'
    b'"topicSysFlag":0,"writeQueueNums":4}}}}'
)
# §3.7: the verified inflated form of Java's compressed registration.
COMPRESSED_BODY = zlib.compress(
    b"\0\0\0'" + b'{"counter":3,"timestamp":1700000000000}'
    + b"\0\0\0\x01" + b"\0\0\0\x1a" + b"TopicTest 4 4 6 SINGLE_TAG"
    + b"\0\0\0\x02" + b"[]",
    9,
)

ROUTE_DEFAULT = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)
ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)
CLUSTER_INFO = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.10:10911",'
    b'1:"192.168.1.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},'
    b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)


def register_cmd(addr: str, broker_id: int, body: bytes, compressed: bool,
                 crc: int | None = None) -> RemotingCommand:
    return request(RequestCode.REGISTER_BROKER, {
        "brokerName": "broker-a",
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr.replace("10911", "10912"),
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc),
    }, body)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
async def test_registration_then_route_bytes(namesrv: NamesrvController,
                                             client: RemotingClient, compressed: bool) -> None:
    ns = addr_of(namesrv)
    body = COMPRESSED_BODY if compressed else PLAIN_BODY
    master = await client.invoke(ns, register_cmd(MASTER, 0, body, compressed))
    assert (master.code, master.remark, master.ext_fields, master.body) == (0, None, {}, None)
    slave = await client.invoke(ns, register_cmd(SLAVE, 1, body, compressed))
    assert slave.code == ResponseCode.SUCCESS
    assert slave.ext_fields == {"masterAddr": MASTER, "haServerAddr": "192.168.1.10:10912"}

    old = await client.invoke(ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          {"topic": "TopicTest"}, version=400))
    assert (old.code, old.remark, old.ext_fields) == (0, None, None)
    assert old.body == ROUTE_DEFAULT

    new = await client.invoke(ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          {"topic": "TopicTest"}, version=401))
    assert new.body == ROUTE_STANDARD
    asked = await client.invoke(ns, request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "TopicTest", "acceptStandardJsonOnly": "true"}, version=0))
    assert asked.body == ROUTE_STANDARD

    info = await client.invoke(ns, request(RequestCode.GET_BROKER_CLUSTER_INFO, version=401))
    assert (info.code, info.ext_fields, info.body) == (0, None, CLUSTER_INFO)


async def test_crc_mismatch_and_bad_body(namesrv: NamesrvController,
                                         client: RemotingClient) -> None:
    ns = addr_of(namesrv)
    bad = await client.invoke(ns, register_cmd(MASTER, 0, PLAIN_BODY, False, crc=12345))
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    unchecked = await client.invoke(ns, register_cmd(MASTER, 0, PLAIN_BODY, False, crc=0))
    assert unchecked.code == ResponseCode.SUCCESS
    garbage = await client.invoke(ns, register_cmd(MASTER, 0, b"\x00garbage", True))
    assert garbage.code == ResponseCode.SYSTEM_ERROR
    assert "RegisterBrokerBody" in (garbage.remark or "")


async def test_unknown_topic_and_missing_header(namesrv: NamesrvController,
                                                client: RemotingClient) -> None:
    ns = addr_of(namesrv)
    resp = await client.invoke(ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == ("No topic route info in name server for the topic: X"
                           "\nSee http://rocketmq.apache.org/docs/faq/ for further details.")
    assert resp.body is None
    missing = await client.invoke(ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}))
    assert missing.code == ResponseCode.SYSTEM_ERROR and "topic" in (missing.remark or "")
    unsupported = await client.invoke(ns, request(RequestCode.SEND_MESSAGE, {}))
    assert unsupported.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_pre_3_0_11_broker_sends_the_bare_wrapper(namesrv: NamesrvController,
                                                        client: RemotingClient) -> None:
    wrapper = (b'{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"Old":'
               b'{"perm":6,"readQueueNums":2,"topicName":"Old","writeQueueNums":2}}}')
    cmd = register_cmd(MASTER, 0, wrapper, False)
    resp = await client.invoke(addr_of(namesrv), dataclasses.replace(cmd, version=36))
    assert resp.code == ResponseCode.SUCCESS
    route = namesrv.state.routes.pickup_route("Old")
    assert route is not None and route.queue_datas[0].read_queue_nums == 2


def test_every_4_9_7_name_server_code_is_routed() -> None:
    assert build_router().codes == {100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 219, 224,
                                    304, 311, 312, 313, 318, 319, 322, 327}


def test_browser_compatible_escaping() -> None:
    assert browser_compatible('{"a":"x/y"}') == '{"a":"x\\/y"}'
    assert browser_compatible('{"a":"é\x7f😀"}') == '{"a":"\\u00E9\\u007F\\uD83D\\uDE00"}'
    assert encode_route({"k": {0: "é"}}, standard=False) == '{"k":{0:"é"}}'.encode()
    assert encode_route({"k": {0: "é"}}, standard=True) == b'{"k":{"0":"\\u00E9"}}'
    assert body_crc32(None) == body_crc32(b"") == 0
    assert body_crc32(PLAIN_BODY) == zlib.crc32(PLAIN_BODY) & 0x7FFFFFFF
