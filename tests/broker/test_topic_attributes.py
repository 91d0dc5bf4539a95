"""Topic attributes (5.x `message.type`, ...) and consumeMessageOrderly on a real broker:
created, refused and changed as Apache 5.3 does, kept across a restart, read back by
GET_ALL_TOPIC_CONFIG and GET_TOPIC_CONFIG (351)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from engine.protocol.body.topic import TopicConfigAndQueueMapping, TopicFilterType
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import CreateTopicRequestHeader
from engine.protocol.wire import from_json, to_ext
from engine.remoting.client import RemotingClient

from .conftest import call, running_broker
from .test_admin_topic import parsed


async def create(client: RemotingClient, addr: str, topic: str, attributes: str | None,
                 queues: int = 4) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6,
                                      TopicFilterType.SINGLE_TAG, False, 0, attributes)
    return await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))


async def topic_config(client: RemotingClient, addr: str, topic: str) -> RemotingCommand:
    return await call(client, addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic, "lo": "false"})


def ok(resp: RemotingCommand) -> None:
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)


async def test_created_with_attributes_read_back_and_kept_across_a_restart(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    async with running_broker(tmp_path, namesrv) as broker:
        ok(await create(client, broker.addr, "Fifo", "+message.type=FIFO,+queue.type=SimpleCQ"))
        resp = await topic_config(client, broker.addr, "Fifo")
        # TopicConfigAndQueueMapping in fastjson form (no mappingDetail: not a static topic)
        assert resp.body == (b'{"attributes":{"message.type":"FIFO","queue.type":"SimpleCQ"},'
                             b'"order":false,"perm":6,"readQueueNums":4,"topicFilterType":'
                             b'"SINGLE_TAG","topicName":"Fifo","topicSysFlag":0,'
                             b'"writeQueueNums":4}')
        answer = from_json(TopicConfigAndQueueMapping, parsed(resp))
        assert answer.message_type == "FIFO"
        listed = parsed(await call(client, broker.addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        assert listed["topicConfigTable"]["Fifo"]["attributes"] == {  # type: ignore[index]
            "message.type": "FIFO", "queue.type": "SimpleCQ"}
        ok(await create(client, broker.addr, "Plain", None))
    saved = json.loads((tmp_path / "broker-a/store/config/topics.json").read_text())
    assert saved["topicConfigTable"]["Fifo"]["attributes"]["message.type"] == "FIFO"
    assert "attributes" not in saved["topicConfigTable"]["Plain"]  # as 4.9 writes it

    async with running_broker(tmp_path, namesrv) as broker:
        fifo = broker.state.topics.get("Fifo")
        assert fifo is not None and fifo.message_type == "FIFO"
        plain = broker.state.topics.get("Plain")
        assert plain is not None and plain.message_type == "NORMAL"  # Apache's default


async def test_changes_accepted_and_refused_as_apache(broker: BrokerController,
                                                      client: RemotingClient) -> None:
    ok(await create(client, broker.addr, "T", "+message.type=FIFO,+queue.type=SimpleCQ"))

    def attributes() -> dict[str, str] | None:
        config = broker.state.topics.get("T")
        assert config is not None
        return config.attributes

    ok(await create(client, broker.addr, "T", None, queues=8))  # a 4.x client: kept
    assert attributes() == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    ok(await create(client, broker.addr, "T", "+message.type=DELAY"))  # changeable
    assert attributes() == {"message.type": "DELAY", "queue.type": "SimpleCQ"}
    for text, remark in [
        ("+queue.type=SimpleCQ", "attempt to update an unchangeable attribute. key: queue.type"),
        ("-queue.type", "attempt to update an unchangeable attribute. key: queue.type"),
        ("+cleanup.policy=DELETE",
         "attempt to update an unchangeable attribute. key: cleanup.policy"),
        ("-reserve.time", "attempt to delete a nonexistent key: reserve.time"),
        ("+message.type=fifo",
         "value is not in set: [UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL]"),
        ("+colour=red", "unsupported key: colour"),
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
    ]:
        resp = await create(client, broker.addr, "T", text)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark), text
    assert attributes() == {"message.type": "DELAY", "queue.type": "SimpleCQ"}
    ok(await create(client, broker.addr, "T", "-message.type"))
    assert attributes() == {"queue.type": "SimpleCQ"}

    resp = await create(client, broker.addr, "New", "-message.type")
    assert (resp.code, resp.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "only add attribute is supported while creating topic. key: message.type")
    assert broker.state.topics.get("New") is None
    resp = await create(client, broker.addr, "New", "+message.type=MIXED")
    assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER,
                                        "MIXED message type is not supported.")
    # This broker's consume queues are SimpleCQ and it compacts nothing: said, not ignored.
    resp = await create(client, broker.addr, "New", "+queue.type=BatchCQ")
    assert (resp.code, resp.remark) == (
        ResponseCode.SYSTEM_ERROR, "queue.type BatchCQ is not supported by this broker: its "
                                   "topics are queue.type=SimpleCQ")
    resp = await create(client, broker.addr, "New", "+cleanup.policy=COMPACTION")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert broker.state.topics.get("New") is None


async def test_mixed_allowed_by_enable_mixed_message_type(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    async with running_broker(tmp_path, namesrv, enable_mixed_message_type=True) as broker:
        ok(await create(client, broker.addr, "Mixed", "+message.type=MIXED"))
        config = broker.state.topics.get("Mixed")
        assert config is not None and config.message_type == "MIXED"


async def test_get_topic_config_of_an_unknown_topic(broker: BrokerController,
                                                    client: RemotingClient) -> None:
    resp = await topic_config(client, broker.addr, "Nope")
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                        "No topic in this broker. topic: Nope")
    resp = await topic_config(client, broker.addr, "TBW102")  # system topics too
    assert from_json(TopicConfigAndQueueMapping, parsed(resp)).perm == 7


@pytest.mark.parametrize("orderly", [True, False])
async def test_consume_message_orderly_is_kept(tmp_path: Path, namesrv: NamesrvController,
                                               client: RemotingClient, orderly: bool) -> None:
    body = json.dumps({"groupName": "CG", "consumeMessageOrderly": orderly}).encode()
    async with running_broker(tmp_path, namesrv) as broker:
        ok(await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=body))
        resp = await call(client, broker.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert (b'"consumeMessageOrderly":true' in (resp.body or b"")) is orderly
        table = from_json(SubscriptionGroupWrapper, parsed(resp)).subscription_group_table
        assert table["CG"].orderly is orderly
    async with running_broker(tmp_path, namesrv) as broker:
        config = broker.state.groups.get("CG")
        assert config is not None and config.orderly is orderly


async def test_group_attributes_are_refused_as_5_3_defines_none(
        broker: BrokerController, client: RemotingClient) -> None:
    body = json.dumps({"groupName": "CG", "attributes": {"+colour": "red"}}).encode()
    resp = await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=body)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "unsupported key: colour")
    assert broker.state.groups.get("CG") is None


async def test_get_subscription_group_config(tmp_path: Path, namesrv: NamesrvController,
                                             client: RemotingClient) -> None:
    body = json.dumps({"groupName": "CG", "consumeMessageOrderly": True}).encode()
    async with running_broker(tmp_path, namesrv,
                              auto_create_subscription_group=False) as broker:
        ok(await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=body))
        resp = await call(client, broker.addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                          {"group": "CG"})
        assert from_json(SubscriptionGroupConfig, parsed(resp)).orderly is True
        resp = await call(client, broker.addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                          {"group": "Nope"})
        assert (resp.code, resp.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                            "No group in this broker")


async def test_get_subscription_group_config_creates_on_first_use(
        broker: BrokerController, client: RemotingClient) -> None:
    resp = await call(client, broker.addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                      {"group": "Fresh"})
    assert from_json(SubscriptionGroupConfig, parsed(resp)).group_name == "Fresh"
    assert broker.state.groups.get("Fresh") is not None
