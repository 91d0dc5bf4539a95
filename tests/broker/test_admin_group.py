"""Subscription groups and offset tables: create, delete, list, clone, through the protocol."""

from __future__ import annotations

from engine.broker.controller import BrokerController
from engine.protocol.body.offsets import ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper
from engine.protocol.body.subscription import SubscriptionGroupWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.wire import from_json
from engine.remoting.client import RemotingClient

from .conftest import call
from .helpers import heartbeat
from .test_admin_topic import SLAVE_REMARK, as_slave, create_topic, parsed

# request-codes.md §5.9
GROUP_CG = (b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
            b'"consumeFromMinEnable":true,"groupName":"CG","notifyConsumerIdsChangedEnable":true,'
            b'"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}')


async def test_create_group_and_list_it_in_fastjson_form(broker: BrokerController,
                                                         client: RemotingClient) -> None:
    before = broker.state.groups.data_version.counter
    resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=GROUP_CG)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)

    resp = await call(client, broker.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    wrapper = from_json(SubscriptionGroupWrapper, parsed(resp))
    version = wrapper.data_version
    assert version.counter == before + 1
    assert b'"CG":' + GROUP_CG in (resp.body or b"")  # §5.9 SubscriptionGroupWrapper
    assert (resp.body or b"").startswith(b'{"dataVersion":{"counter":%d,"timestamp":%d},'
                                         b'"subscriptionGroupTable":{'
                                         % (version.counter, version.timestamp))
    assert "TOOLS_CONSUMER" in wrapper.subscription_group_table

    update = GROUP_CG.replace(b'"retryMaxTimes":16', b'"retryMaxTimes":3')
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=update)
    group = broker.state.groups.get("CG")
    assert group is not None and group.retry_max_times == 3


async def test_create_group_refusals(broker: BrokerController, client: RemotingClient) -> None:
    code = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    resp = await call(client, broker.addr, code)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "needs a SubscriptionGroupConfig JSON body" in (resp.remark or "")
    resp = await call(client, broker.addr, code, body=b'{"retryMaxTimes":3}')
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "no groupName" in (resp.remark or "")
    resp = await call(client, broker.addr, code, body=b'{"groupName":"G","brokerId":"x"}')
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "brokerId" in (resp.remark or "")
    with as_slave(broker):
        resp = await call(client, broker.addr, code, body=GROUP_CG)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        resp = await call(client, broker.addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                          {"groupName": "TOOLS_CONSUMER", "removeOffset": "false"})
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
    assert broker.state.groups.get("CG") is None
    assert broker.state.groups.get("TOOLS_CONSUMER") is not None


async def test_delete_group_keeps_or_removes_offsets(broker: BrokerController,
                                                     client: RemotingClient) -> None:
    st = broker.state
    for group in ("G1", "G2"):
        await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                   body=b'{"groupName":"%s"}' % group.encode())
        st.offsets.commit(group, "T", 0, 7)
    resp = await call(client, broker.addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                      {"groupName": "G1", "removeOffset": "false"})
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    resp = await call(client, broker.addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                      {"groupName": "G2", "removeOffset": "true"})
    assert resp.code == ResponseCode.SUCCESS
    assert st.groups.get("G1") is None and st.groups.get("G2") is None
    assert st.offsets.query("G1", "T", 0) == 7
    assert st.offsets.query("G2", "T", 0) == -1


async def test_all_consumer_offsets_in_fastjson_form(broker: BrokerController,
                                                     client: RemotingClient) -> None:
    broker.state.offsets.set_offsets("CG", "TopicTest", {0: 10, 1: 12})
    resp = await call(client, broker.addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert resp.body == b'{"offsetTable":{"TopicTest@CG":{0:10,1:12}}}'  # request-codes §2
    table = from_json(ConsumerOffsetSerializeWrapper, parsed(resp)).offset_table
    assert table == {"TopicTest@CG": {0: 10, 1: 12}}


async def test_all_delay_offsets(broker: BrokerController, client: RemotingClient) -> None:
    resp = await call(client, broker.addr, RequestCode.GET_ALL_DELAY_OFFSET)
    assert (resp.code, resp.body) == (ResponseCode.SUCCESS, b'{"offsetTable":{}}')
    broker.state.schedule.offsets.update({3: 5, 1: 2})
    resp = await call(client, broker.addr, RequestCode.GET_ALL_DELAY_OFFSET)
    assert resp.body == b'{"offsetTable":{1:2,3:5}}'  # request-codes §2
    assert from_json(DelayOffsetSerializeWrapper, parsed(resp)).offset_table == {1: 2, 3: 5}


async def test_clone_group_offset(broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    for topic in ("A", "B"):
        await create_topic(client, broker.addr, topic, queues=2)
        st.offsets.set_offsets("SRC", topic, {0: 3, 1: 4})
    st.offsets.set_offsets("SRC", "Gone", {0: 1})  # no topic config: never cloned

    resp = await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET,
                      {"srcGroup": "SRC", "destGroup": "D1", "topic": "A", "offline": "false"})
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    assert st.offsets.topics_of_group("D1") == {"A"}
    assert st.offsets.queue_offsets("D1", "A") == {0: 3, 1: 4}

    await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET,
               {"srcGroup": "SRC", "destGroup": "D2", "offline": "false"})
    assert st.offsets.topics_of_group("D2") == {"A", "B"}


async def test_clone_skips_topics_an_online_source_does_not_subscribe(
        broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    for topic in ("A", "B"):
        await create_topic(client, broker.addr, topic, queues=1)
        st.offsets.set_offsets("SRC", topic, {0: 3})
    consumer = RemotingClient()
    try:
        await consumer.invoke(broker.addr, heartbeat("C1", consumer_group="SRC", topics=("A",)))
        await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET,
                   {"srcGroup": "SRC", "destGroup": "ONLINE", "offline": "false"})
        assert st.offsets.topics_of_group("ONLINE") == {"A"}
        await call(client, broker.addr, RequestCode.CLONE_GROUP_OFFSET,
                   {"srcGroup": "SRC", "destGroup": "OFFLINE", "offline": "true"})
        assert st.offsets.topics_of_group("OFFLINE") == {"A", "B"}
    finally:
        await consumer.close()
