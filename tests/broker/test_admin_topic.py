"""Topic administration: create, delete, list, stats and who consumes, through the protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.admin import GroupList, TopicOffset, TopicStatsTable
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import TopicList
from engine.protocol.body.topic import TopicConfigSerializeWrapper, TopicFilterType
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import CreateTopicRequestHeader
from engine.protocol.message import BrokerMessage
from engine.protocol.wire import from_json, to_ext
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from engine.store.results import PutMessageResult, PutMessageStatus

from .conftest import call
from .helpers import heartbeat

SLAVE_REMARK = ("Can't modify topic or subscription group from slave broker, "
                "please execute it from master broker.")


# ---------------------------------------------------------------------------- helpers


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4,
                       perm: int = 6) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, perm,
                                      TopicFilterType.SINGLE_TAG, False, 0)
    return await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))


async def put_messages(broker: BrokerController, topic: str, queue_id: int,
                       count: int) -> list[PutMessageResult]:
    results = []
    for i in range(count):
        result = await broker.state.store.put_message(
            BrokerMessage(topic, b"body-%d" % i, queue_id, properties="TAGS\x01A"))
        assert result.status is PutMessageStatus.PUT_OK, result
        results.append(result)
    return results


@contextmanager
def as_slave(broker: BrokerController) -> Iterator[None]:
    cfg = broker.state.store_config
    role, cfg.broker_role = cfg.broker_role, BrokerRole.SLAVE
    try:
        yield
    finally:
        cfg.broker_role = role


def parsed(resp: RemotingCommand) -> object:
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.body is not None
    return fastjson.loads(resp.body)


# ---------------------------------------------------------------------------- create


async def test_create_topic_is_listed_in_fastjson_form_and_registered(
        namesrv: NamesrvController, broker: BrokerController, client: RemotingClient) -> None:
    before = broker.state.topics.data_version.counter
    resp = await create_topic(client, broker.addr, "TopicTest")
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)

    resp = await call(client, broker.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    text = (resp.body or b"").decode()
    # request-codes.md §5.7, byte for byte
    assert ('"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":'
            '"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}') in text
    wrapper = from_json(TopicConfigSerializeWrapper, parsed(resp))
    version = wrapper.data_version
    assert text.startswith(f'{{"dataVersion":{{"counter":{version.counter},"timestamp":'
                           f'{version.timestamp}}},"topicConfigTable":{{')
    assert wrapper.data_version.counter == before + 1
    assert wrapper.topic_config_table["TBW102"].perm == 7

    ns = f"127.0.0.1:{namesrv.port}"  # the change re-registers the broker
    for _ in range(100):
        route = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        if route.code == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.05)
    assert parsed(route)["queueDatas"][0]["writeQueueNums"] == 4  # type: ignore[index]


async def test_update_replaces_the_topic(broker: BrokerController,
                                         client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "T1", queues=2)
    assert (await create_topic(client, broker.addr, "T1", queues=8, perm=4)).code == 0
    config = broker.state.topics.get("T1")
    assert config is not None
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (8, 8, 4)


async def test_create_refuses_bad_names_and_system_topics(broker: BrokerController,
                                                          client: RemotingClient) -> None:
    resp = await create_topic(client, broker.addr, "bad topic!")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "contains illegal characters" in (resp.remark or "")
    resp = await create_topic(client, broker.addr, "x" * 128)
    assert "longer than topic max length" in (resp.remark or "")
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a",
                  "DefaultCluster_REPLY_TOPIC", "rmq_sys_anything"):
        resp = await create_topic(client, broker.addr, topic)
        assert (resp.code, resp.remark) == (
            ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    assert broker.state.topics.get("rmq_sys_anything") is None


async def test_create_without_a_required_field_names_it(broker: BrokerController,
                                                        client: RemotingClient) -> None:
    ext = to_ext(CreateTopicRequestHeader("T2", "TBW102", 1, 1, 6, TopicFilterType.SINGLE_TAG,
                                          False))
    del ext["perm"]
    resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "'perm'" in (resp.remark or "")
    assert broker.state.topics.get("T2") is None


async def test_slave_refuses_topic_creation_but_takes_deletions(
        broker: BrokerController, client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "Gone")
    with as_slave(broker):
        resp = await create_topic(client, broker.addr, "T3")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        # deleteTopic reaches slaves too, so a promotion cannot bring the topic back
        resp = await call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                          {"topic": "Gone"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert broker.state.topics.get("T3") is None
    assert broker.state.topics.get("Gone") is None


# ---------------------------------------------------------------------------- delete


async def test_delete_topic_drops_config_offsets_and_queues(broker: BrokerController,
                                                            client: RemotingClient) -> None:
    st = broker.state
    await create_topic(client, broker.addr, "Doomed", queues=2)
    await create_topic(client, broker.addr, "Other", queues=1)
    await put_messages(broker, "Doomed", 1, 3)
    await put_messages(broker, "Other", 0, 1)
    st.offsets.commit("CG", "Doomed", 1, 2)
    st.offsets.commit("CG", "Other", 0, 1)
    assert "Doomed" in st.store.topic_queues()

    resp = await call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"})
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    assert st.topics.get("Doomed") is None
    assert st.offsets.queue_offsets("CG", "Doomed") == {}
    assert st.offsets.queue_offsets("CG", "Other") == {0: 1}
    assert "Doomed" not in st.store.topic_queues()
    assert st.store.get_max_offset_in_queue("Other", 0) == 1


async def test_delete_refuses_system_topics(broker: BrokerController,
                                            client: RemotingClient) -> None:
    for topic in ("TBW102", "DefaultCluster", "SELF_TEST_TOPIC"):
        resp = await call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                          {"topic": topic})
        assert (resp.code, resp.remark) == (
            ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        assert broker.state.topics.get(topic) is not None


# ---------------------------------------------------------------------------- queries


async def test_topic_stats_per_write_queue(broker: BrokerController,
                                           client: RemotingClient) -> None:
    await create_topic(client, broker.addr, "TopicTest", queues=2)
    results = await put_messages(broker, "TopicTest", 1, 3)
    resp = await call(client, broker.addr, RequestCode.GET_TOPIC_STATS_INFO,
                      {"topic": "TopicTest"})
    stats = from_json(TopicStatsTable, parsed(resp))
    last = results[-1].store_timestamp
    assert stats.offset_table == {
        MessageQueue("TopicTest", "broker-a", 0): TopicOffset(0, 0, 0),
        MessageQueue("TopicTest", "broker-a", 1): TopicOffset(0, 3, last),
    }
    # request-codes.md §5.5: the queue object is the (unquoted) map key
    assert resp.body == (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
        b'{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
        b'{"lastUpdateTimestamp":%d,"maxOffset":3,"minOffset":0}}}' % last)

    resp = await call(client, broker.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


async def test_system_topic_list(broker: BrokerController, client: RemotingClient) -> None:
    resp = await call(client, broker.addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    topics = from_json(TopicList, parsed(resp))
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a", "SELF_TEST_TOPIC",
            "DefaultCluster_REPLY_TOPIC", "OFFSET_MOVED_EVENT"} <= set(topics.topic_list)
    assert topics.broker_addr is None
    assert (resp.body or b"").startswith(b'{"topicList":["')


async def test_who_consumes_a_topic(broker: BrokerController, client: RemotingClient) -> None:
    broker.state.offsets.commit("OffsetGroup", "TopicTest", 0, 5)
    broker.state.offsets.commit("ElseGroup", "Else", 0, 5)
    consumer = RemotingClient()
    try:
        resp = await consumer.invoke(broker.addr, heartbeat("C1", consumer_group="OnlineGroup",
                                                            topics=("TopicTest",)))
        assert resp.code == ResponseCode.SUCCESS
        resp = await call(client, broker.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                          {"topic": "TopicTest"})
        groups = from_json(GroupList, parsed(resp))
        assert groups.group_list == {"OffsetGroup", "OnlineGroup"}
        assert resp.body == b'{"groupList":["OffsetGroup","OnlineGroup"]}'
    finally:
        await consumer.close()


async def test_a_deleted_topic_created_again_starts_empty(broker: BrokerController,
                                                          client: RemotingClient) -> None:
    from tests.broker.helpers import pull_request, send_request

    for topic in ("Again", "%DLQ%SomeGroup"):
        await create_topic(client, broker.addr, topic, queues=1)
        for _ in range(3):
            assert (await client.invoke(broker.addr, send_request(topic, b"x"))).code == 0
        resp = await call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                          {"topic": topic})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        await create_topic(client, broker.addr, topic, queues=1)
        assert broker.state.store.get_max_offset_in_queue(topic, 0) == 0
        sent = await client.invoke(broker.addr, send_request(topic, b"fresh"))
        assert (sent.ext_fields or {})["queueOffset"] == "0"
        pulled = await client.invoke(broker.addr, pull_request(topic, 0, 0))
        assert pulled.code == ResponseCode.SUCCESS
