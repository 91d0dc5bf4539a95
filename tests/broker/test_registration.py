"""Registration with the name servers: compressed bodies, re-registration on change, slaves."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.broker.controller import BrokerController
from engine.broker.registration import Registration
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole

from .conftest import broker_configs, call


async def route(client: RemotingClient, ns: str, topic: str) -> dict[str, object] | None:
    resp = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code != ResponseCode.SUCCESS:
        return None
    result: dict[str, object] = fastjson.loads(resp.body or b"{}")
    return result


async def test_compressed_registration_and_reregistration_on_topic_change(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    config, store = broker_configs(tmp_path, ns, compressed_register=True)
    broker = BrokerController(config, store)
    await broker.start()
    try:
        while await route(client, ns, "TBW102") is None:  # the first registration at start
            await asyncio.sleep(0.01)
        version = broker.state.topics.data_version
        resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "NewTopic", "defaultTopic": "TBW102", "readQueueNums": "3",
            "writeQueueNums": "3", "perm": "6", "topicFilterType": "SINGLE_TAG"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert broker.state.topics.data_version.counter == version.counter + 1
        found = await route(client, ns, "NewTopic")  # registered before the answer
        assert found is not None
        assert found["queueDatas"] == [{"brokerName": "broker-a", "perm": 6,
                                        "readQueueNums": 3, "topicSysFlag": 0,
                                        "writeQueueNums": 3}]
    finally:
        await broker.stop()
    assert await route(client, ns, "NewTopic") is None  # unregistered at shutdown


async def test_slave_learns_its_master(tmp_path: Path, namesrv: NamesrvController,
                                      broker: BrokerController) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    await broker.registration.register_all()
    config, store = broker_configs(tmp_path, ns, name="broker-a", broker_id=1,
                                   broker_role=BrokerRole.SLAVE)
    store.store_path_root_dir = str(tmp_path / "slave-store")
    slave = BrokerController(config, store)
    await slave.start()
    try:
        results = await slave.registration.register_all()
        assert results and results[0].ok
        assert slave.state.master_addr == broker.addr
        assert slave.state.ha_master_addr == broker.state.ha_server_addr
        client = RemotingClient()
        try:
            info = fastjson.loads((await call(client, ns,
                                              RequestCode.GET_BROKER_CLUSTER_INFO)).body)
            assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
                0: broker.addr, 1: slave.addr}
            refused = await call(client, slave.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "X", "defaultTopic": "TBW102", "readQueueNums": "1",
                "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
            assert refused.code == ResponseCode.SYSTEM_ERROR
        finally:
            await client.close()
    finally:
        await slave.stop()


async def test_a_round_under_way_never_brings_back_a_route_deleted_meanwhile(
        namesrv: NamesrvController, broker: BrokerController, client: RemotingClient) -> None:
    """deleteTopic deletes on the broker, then on the name server: a registration round that
    started before the broker's delete must not reach the name server with the old table."""
    ns = f"127.0.0.1:{namesrv.port}"
    await client.connection(ns)
    topics = broker.state.topics
    topics.on_change = None  # only this test's rounds register
    topics.put(TopicConfig("Gone", 1, 1))
    under_way = asyncio.ensure_future(broker.registration.register_all())
    await asyncio.sleep(0)  # a round with the new topic has started, nothing written yet
    # What DELETE_TOPIC_IN_BROKER does, then the admin's name-server delete, both before the
    # round writes anything (an admin in another process can be that quick).
    assert topics.delete("Gone") is not None
    resp = await call(client, ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Gone"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert all(r.ok for r in await under_way)
    assert await route(client, ns, "Gone") is None


async def test_a_creation_registers_before_its_answer_and_wakes_no_later_round(
        namesrv: NamesrvController, broker: BrokerController, client: RemotingClient) -> None:
    """As Apache: the route exists when the creator has its answer, and no background round
    carrying the new topic is left to reach the name server after the creator's next step
    (deleteSubGroup's delete of the retry topic there, say)."""
    ns = f"127.0.0.1:{namesrv.port}"
    background: list[TopicConfig | None] = []  # what each timer round found
    register_all = broker.registration.register_all

    async def counted() -> list[Registration]:
        background.append(broker.state.topics.get("Made"))
        return await register_all()

    broker.registration.register_all = counted  # type: ignore[method-assign]  # the timer's
    resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Made", "defaultTopic": "TBW102", "readQueueNums": "1",
        "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert await route(client, ns, "Made") is not None
    for _ in range(20):  # the background task has long run, if it was woken
        await asyncio.sleep(0)
    assert background == []
    broker.registration.request()  # a change nobody registered still gets its round
    while not background:
        await asyncio.sleep(0)


async def test_a_permission_change_is_answered_once_the_name_servers_have_it(
        namesrv: NamesrvController, broker: BrokerController, client: RemotingClient) -> None:
    """updateBrokerConfig brokerPermission=4 (an operator makes a broker read-only): as in Apache,
    the routes say read-only by the time the operator has the answer."""
    ns = f"127.0.0.1:{namesrv.port}"

    async def not_now() -> list[Registration]:
        return []

    broker.registration.register_all = not_now  # type: ignore[method-assign]  # the timer's
    resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Capped", "defaultTopic": "TBW102", "readQueueNums": "1",
        "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await call(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG,
                      body=b"brokerPermission=4\n")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    found = await route(client, ns, "Capped")
    assert found is not None and found["queueDatas"] == [{
        "brokerName": "broker-a", "perm": 4, "readQueueNums": 1, "topicSysFlag": 0,
        "writeQueueNums": 1}]
