"""`NamesrvAdmin` against real in-process name servers and a broker, and odd fake servers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from engine.broker.controller import BrokerController
from engine.client.core.errors import (
    RESPONSE_ERRORS,
    BadResponseError,
    ConsumerNotOnlineError,
    InvalidAddressError,
    NoPermissionError,
    NotFoundError,
    QueryNotFoundError,
    ServerError,
    ServerSystemError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
    UnreachableError,
    raise_for,
)
from engine.client.core.namesrv import NamesrvAdmin, parse_cluster_info, parse_route
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.perm import PERM_READ, PERM_WRITE
from engine.remoting.errors import RemotingConnectError, RemotingError
from tests.conftest import addr_of, closed_port_addr

from .conftest import Handler, create_topic

FakeServer = Callable[[dict[int, Handler]], Awaitable[str]]

# Apache 4.9.7 output, verbatim from the spec (request-codes.md §5.1, §5.2).
APACHE_ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},'
                b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
                b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
                b'"topicSysFlag":0,"writeQueueNums":4}]}')
STANDARD_ROUTE = APACHE_ROUTE.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
APACHE_CLUSTER = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.10:10911",'
                  b'1:"192.168.1.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},'
                  b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


# ---------------------------------------------------------------------------- routes


async def test_cluster_info(namesrv: NamesrvController, broker: BrokerController) -> None:
    async with NamesrvAdmin([addr_of(namesrv)]) as admin:
        info = await admin.cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: broker.addr}


async def test_topic_route(namesrv: NamesrvController, broker: BrokerController) -> None:
    await create_topic(broker, "RouteTopic", queues=3)
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        route = await admin.topic_route("RouteTopic")
    [queue] = route.queue_datas
    assert (queue.broker_name, queue.read_queue_nums, queue.write_queue_nums, queue.perm) == (
        "broker-a", 3, 3, 6)
    [data] = route.broker_datas
    assert (data.cluster, data.broker_addrs) == ("DefaultCluster", {0: broker.addr})


async def test_unknown_topic_raises_topic_not_exist(namesrv: NamesrvController,
                                                    broker: BrokerController) -> None:
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        with pytest.raises(TopicNotExistError) as caught:
            await admin.topic_route("NoSuchTopic")
    err = caught.value
    assert err.code == ResponseCode.TOPIC_NOT_EXIST
    assert err.addr == addr_of(namesrv)
    assert "NoSuchTopic" in err.summary and "\n" not in err.summary
    assert isinstance(err, NotFoundError)


async def test_topic_lists(namesrv: NamesrvController, broker: BrokerController) -> None:
    await create_topic(broker, "PlainTopic")
    await create_topic(broker, "UnitTopic", sys_flag=0x1)
    await create_topic(broker, "UnitSubTopic", sys_flag=0x2)
    await create_topic(broker, "UnitBothTopic", sys_flag=0x3)
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        everything = (await admin.all_topics()).topic_list
        in_cluster = (await admin.topics_by_cluster("DefaultCluster")).topic_list
        elsewhere = (await admin.topics_by_cluster("NoSuchCluster")).topic_list
        system = await admin.system_topics()
        unit = (await admin.unit_topics()).topic_list
        unit_sub = (await admin.has_unit_sub_topics()).topic_list
        unit_sub_ununit = (await admin.has_unit_sub_ununit_topics()).topic_list
    assert {"TBW102", "PlainTopic", "UnitTopic"} <= set(everything)
    assert set(in_cluster) == set(everything)
    assert elsewhere == []
    assert {"DefaultCluster", "broker-a"} <= set(system.topic_list)
    assert system.broker_addr == broker.addr
    assert set(unit) == {"UnitTopic", "UnitBothTopic"}
    assert set(unit_sub) == {"UnitSubTopic", "UnitBothTopic"}
    assert unit_sub_ununit == ["UnitSubTopic"]


async def test_delete_topic(namesrv: NamesrvController, broker: BrokerController) -> None:
    await create_topic(broker, "Doomed")
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        await admin.delete_topic("Doomed", cluster="DefaultCluster")
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("Doomed")
        assert "Doomed" not in (await admin.all_topics()).topic_list


async def test_wipe_and_add_write_perm(namesrv: NamesrvController,
                                       broker: BrokerController) -> None:
    await create_topic(broker, "PermTopic")
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        topics = len((await admin.topics_by_cluster("DefaultCluster")).topic_list)
        assert await admin.wipe_write_perm("broker-a") == topics
        route = await admin.topic_route("PermTopic")
        assert route.queue_datas[0].perm == PERM_READ
        assert await admin.add_write_perm("broker-a") == topics
        route = await admin.topic_route("PermTopic")
        assert route.queue_datas[0].perm == PERM_READ | PERM_WRITE
        assert await admin.wipe_write_perm("no-such-broker") == 0


# ---------------------------------------------------------------------------- KV and config


async def test_kv_config_round_trip(namesrv: NamesrvController) -> None:
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        await admin.put_kv_config("NS", "k1", "v1")
        await admin.put_kv_config("NS", "k2", "v 2")
        assert await admin.get_kv_config("NS", "k1") == "v1"
        assert await admin.get_kv_list("NS") == {"k1": "v1", "k2": "v 2"}
        await admin.delete_kv_config("NS", "k1")
        with pytest.raises(QueryNotFoundError) as caught:
            await admin.get_kv_config("NS", "k1")
        assert caught.value.code == ResponseCode.QUERY_NOT_FOUND
        await admin.delete_kv_config("NS", "absent")  # deleting nothing succeeds
        with pytest.raises(QueryNotFoundError):
            await admin.get_kv_list("EmptyNamespace")


async def test_get_and_update_config(namesrv: NamesrvController) -> None:
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        before = await admin.get_config()
        assert before["listenPort"] == "0"  # as configured (port 0: the OS picked one)
        assert before["orderMessageEnable"] == "false"
        await admin.update_config({"orderMessageEnable": True})
        assert (await admin.get_config())["orderMessageEnable"] == "true"


async def test_protected_config_key_is_no_permission(namesrv: NamesrvController) -> None:
    async with NamesrvAdmin(addr_of(namesrv)) as admin:
        with pytest.raises(NoPermissionError) as caught:
            await admin.update_config({"kvConfigPath": "/tmp/elsewhere.json"})
    assert caught.value.code == ResponseCode.NO_PERMISSION
    assert "config path" in caught.value.remark


# ---------------------------------------------------------------------------- fail-over


async def test_fails_over_to_the_second_address(namesrv: NamesrvController,
                                                broker: BrokerController) -> None:
    dead = closed_port_addr()
    skipped: list[tuple[str, RemotingError]] = []
    async with NamesrvAdmin(f"{dead};{addr_of(namesrv)}") as admin:
        admin.on_failover = lambda addr, exc: skipped.append((addr, exc))
        info = await admin.cluster_info()
        assert "broker-a" in info.broker_addr_table
        assert [a for a, _ in skipped] == [dead]
        assert isinstance(skipped[0][1], RemotingConnectError)
        await admin.all_topics()  # sticks to the server that answered
        assert len(skipped) == 1


async def test_unreachable_names_every_address() -> None:
    first, second = closed_port_addr(), closed_port_addr()
    async with NamesrvAdmin([first, second], timeout=1) as admin:
        with pytest.raises(UnreachableError) as caught:
            await admin.cluster_info()
    assert caught.value.addrs == [first, second]
    assert first in str(caught.value) and second in str(caught.value)
    assert not caught.value.timed_out


async def test_every_call_has_a_timeout(silent_server: str, namesrv: NamesrvController) -> None:
    async with NamesrvAdmin([silent_server, addr_of(namesrv)], timeout=0.3) as admin:
        await admin.all_topics()  # the silent one times out, the next answers
        with pytest.raises(UnreachableError) as caught:
            await admin.all_topics(addr=silent_server)
    assert caught.value.timed_out
    assert silent_server in str(caught.value)


async def test_addr_targets_one_server_only(namesrv: NamesrvController) -> None:
    dead = closed_port_addr()
    async with NamesrvAdmin([addr_of(namesrv), dead]) as admin:
        with pytest.raises(UnreachableError) as caught:
            await admin.get_config(addr=dead)
        assert caught.value.addrs == [dead]


async def test_on_each_reports_every_server(namesrv: NamesrvController,
                                            namesrv2: NamesrvController) -> None:
    dead = closed_port_addr()
    async with NamesrvAdmin([addr_of(namesrv), dead, addr_of(namesrv2)]) as admin:
        outcomes = await admin.on_each(
            lambda addr: admin.put_kv_config("NS", "k", "v", addr=addr))
        assert [(o.addr, o.ok) for o in outcomes] == [
            (addr_of(namesrv), True), (dead, False), (addr_of(namesrv2), True)]
        assert isinstance(outcomes[1].error, UnreachableError)
        for addr in (addr_of(namesrv), addr_of(namesrv2)):
            assert await admin.get_kv_config("NS", "k", addr=addr) == "v"


def test_invalid_addresses_are_refused() -> None:
    with pytest.raises(InvalidAddressError):
        NamesrvAdmin("localhost")
    with pytest.raises(InvalidAddressError):
        NamesrvAdmin(" ; ")


# ---------------------------------------------------------------------------- Apache's bodies


def test_parse_apache_and_standard_route_bodies() -> None:
    for body in (APACHE_ROUTE, STANDARD_ROUTE):
        route = parse_route(body)
        assert route.broker_datas[0].broker_addrs == {0: "192.168.1.10:10911",
                                                      1: "192.168.1.11:10911"}
        assert route.queue_datas[0].write_queue_nums == 4
    info = parse_cluster_info(APACHE_CLUSTER)
    assert info.broker_addr_table["broker-a"].broker_addrs[1] == "192.168.1.11:10911"
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}


async def test_apache_form_bodies_over_the_wire(fake_namesrv: FakeServer) -> None:
    """An older Java name server ignores acceptStandardJsonOnly: unquoted keys still parse."""
    seen: list[RemotingCommand] = []

    def route(cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        return cmd.response(body=APACHE_ROUTE)

    addr = await fake_namesrv({
        RequestCode.GET_ROUTEINFO_BY_TOPIC: route,
        RequestCode.GET_BROKER_CLUSTER_INFO: lambda cmd: cmd.response(body=APACHE_CLUSTER),
    })
    async with NamesrvAdmin(addr) as admin:
        route_data = await admin.topic_route("TopicTest")
        info = await admin.cluster_info()
    assert seen[0].ext_fields == {"topic": "TopicTest", "acceptStandardJsonOnly": "true"}
    assert route_data.broker_datas[0].broker_addrs[1] == "192.168.1.11:10911"
    assert info.broker_addr_table["broker-a"].broker_addrs[0] == "192.168.1.10:10911"


async def test_undecodable_answers_are_bad_responses(fake_namesrv: FakeServer) -> None:
    addr = await fake_namesrv({
        RequestCode.GET_ROUTEINFO_BY_TOPIC: lambda cmd: cmd.response(body=b"<html>"),
        RequestCode.GET_BROKER_CLUSTER_INFO: lambda cmd: cmd.response(body=b"[1, 2]"),
        RequestCode.WIPE_WRITE_PERM_OF_BROKER: lambda cmd: cmd.response(
            ext_fields={"wipeTopicCount": "many"}),
    })
    async with NamesrvAdmin(addr) as admin:
        with pytest.raises(BadResponseError, match=addr):
            await admin.topic_route("T")
        with pytest.raises(BadResponseError):
            await admin.cluster_info()
        with pytest.raises(BadResponseError):
            await admin.wipe_write_perm("b")


async def test_route_without_body_is_a_bad_response(fake_namesrv: FakeServer) -> None:
    addr = await fake_namesrv({RequestCode.GET_ROUTEINFO_BY_TOPIC: lambda cmd: cmd.response()})
    async with NamesrvAdmin(addr) as admin:
        with pytest.raises(BadResponseError, match="without a body"):
            await admin.topic_route("T")


async def test_other_servers_answer_not_supported(fake_namesrv: FakeServer) -> None:
    addr = await fake_namesrv({})
    async with NamesrvAdmin(addr) as admin:
        with pytest.raises(ServerError) as caught:
            await admin.unit_topics()
    assert caught.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


# ---------------------------------------------------------------------------- the registry


@pytest.mark.parametrize(("code", "cls"), [
    (ResponseCode.TOPIC_NOT_EXIST, TopicNotExistError),
    (ResponseCode.QUERY_NOT_FOUND, QueryNotFoundError),
    (ResponseCode.NO_PERMISSION, NoPermissionError),
    (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, SubscriptionGroupNotExistError),
    (ResponseCode.CONSUMER_NOT_ONLINE, ConsumerNotOnlineError),
    (ResponseCode.SYSTEM_ERROR, ServerSystemError),
    (999, ServerError),
])
def test_raise_for_maps_codes_to_classes(code: int, cls: type[ServerError]) -> None:
    response = RemotingCommand(code=int(code), remark="why\nSee http://faq", flag=1)
    with pytest.raises(ServerError) as caught:
        raise_for(response, "10.0.0.1:9876")
    assert type(caught.value) is cls
    assert caught.value.code == code
    assert caught.value.summary == "why"
    assert "10.0.0.1:9876" in str(caught.value)


def test_registry_and_success() -> None:
    ok = RemotingCommand(code=0, flag=1)
    assert raise_for(ok) is ok
    assert all(issubclass(cls, ServerError) for cls in RESPONSE_ERRORS.values())
    assert 209 not in RESPONSE_ERRORS  # means different things in 4.9 and 5.x
    assert issubclass(UnreachableError, Exception) and not issubclass(UnreachableError,
                                                                      ServerError)
