"""`BrokerAdmin` against answers in the exact byte form Apache brokers send (fastjson: unquoted
integer keys, `MessageQueue` objects as map keys, keys in Java's sorted order, 5.x extras),
served by a fake broker that also records the requests it gets."""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import pytest

from engine.client.admin.broker import BrokerAdmin
from engine.protocol.body.admin import CMResult, OffsetWrapper, TopicOffset
from engine.protocol.body.heartbeat import ConsumeType, MessageModel
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import LanguageCode, RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.message import COMPRESSED_FLAG, encode_record

from .conftest import Handler

FakeServer = Callable[[dict[int, Handler]], Awaitable[str]]
Requests = dict[int, RemotingCommand]

MQ0 = b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
MQ1 = b'{"brokerName":"broker-a","queueId":1,"topic":"T"}'

# 4.9.7 / 5.x fastjson output (request-codes.md §4, §5), as literal bytes.
BODIES: dict[int, bytes] = {
    RequestCode.GET_CONSUME_STATS: (
        b'{"consumeTps":1.5,"offsetTable":{' + MQ0 + b':{"brokerOffset":10,"consumerOffset":5,'
        b'"lastTimestamp":1700000000000,"pullOffset":6}}}'),  # 5.x adds pullOffset
    RequestCode.GET_TOPIC_STATS_INFO: (
        b'{"offsetTable":{' + MQ1 + b':{"lastUpdateTimestamp":1700000000000,"maxOffset":100,'
        b'"minOffset":0}},"topicPutTps":0.0}'),
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: (
        b'{"offsetTable":{' + MQ0 + b':5,' + MQ1 + b':7}}'),
    RequestCode.QUERY_CORRECTION_OFFSET: (
        b'{"correctionOffsets":{0:5,1:9223372036854775807}}'),
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (
        b'{"consumerTable":{"10.0.0.1@1234#5678":{' + MQ0 + b':5}},"messageQueueTable":{}}'),
    RequestCode.GET_ALL_CONSUMER_OFFSET: b'{"offsetTable":{"T@CG":{0:10,1:12}}}',
    RequestCode.GET_ALL_DELAY_OFFSET: b'{"offsetTable":{1:2,3:5}}',
    RequestCode.GET_BROKER_CONSUME_STATS: (
        b'{"brokerAddr":"192.168.1.10:10911","consumeStatsList":[{"CG":[{"consumeTps":0.0,'
        b'"offsetTable":{' + MQ0 + b':{"brokerOffset":10,"consumerOffset":5,'
        b'"lastTimestamp":1700000000000}}}]}],"totalDiff":5}'),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: (
        b'{"connectionSet":[{"clientAddr":"10.0.0.1:54321","clientId":"10.0.0.1@1234#5678",'
        b'"language":"JAVA","version":407}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":'
        b'{"T":{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG",'
        b'"subString":"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],'
        b'"topic":"T"}}}'),
    RequestCode.GET_CONSUMER_RUNNING_INFO: (
        b'{"jstack":"\\"main\\" RUNNABLE","mqTable":{' + MQ0 + b':{"cachedMsgCount":2,'
        b'"cachedMsgMaxOffset":6,"cachedMsgMinOffset":5,"cachedMsgSizeInMiB":0,'
        b'"commitOffset":5,"droped":false,"lastConsumeTimestamp":1700000000000,'
        b'"lastLockTimestamp":0,"lastPullTimestamp":1700000000000,"locked":false,'
        b'"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,'
        b'"tryUnlockTimes":0}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY",'
        b'"PROP_THREADPOOL_CORE_SIZE":"20","consumeThreadMax":"20"},"statusTable":{"T":'
        b'{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"consumeRT":2.0,'
        b'"pullRT":1.0,"pullTPS":3.0}},"subscriptionSet":[{"classFilterMode":false,'
        b'"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,'
        b'"tagsSet":[],"topic":"T"}]}'),
    RequestCode.CONSUME_MESSAGE_DIRECTLY: (
        b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"ok",'
        b'"spentTimeMills":2}'),
    RequestCode.QUERY_CONSUME_TIME_SPAN: (
        b'{"consumeTimeSpanSet":[{"consumeTimeStamp":1700000000500,"consumeTimeStampStr":'
        b'"2023-11-14#22:13:20:500","delayTime":25,"maxTimeStamp":1700000001000,'
        b'"maxTimeStampStr":"2023-11-14#22:13:21:000","messageQueue":' + MQ0 + b','
        b'"minTimeStamp":1700000000000,"minTimeStampStr":"2023-11-14#22:13:20:000"}]}'),
    RequestCode.GET_ALL_TOPIC_CONFIG: (  # 5.x TopicConfigAndMappingSerializeWrapper
        b'{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
        b'"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},'
        b'"topicConfigTable":{"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,'
        b'"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}'),
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (  # 5.x, with its extra fields
        b'{"dataVersion":{"counter":3,"timestamp":1700000000000},"forbiddenTable":{},'
        b'"subscriptionGroupTable":{"CG":{"attributes":{},"brokerId":0,'
        b'"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        b'"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"CG",'
        b'"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
        b'"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        b'"whichBrokerWhenConsumeSlowly":1}}}'),
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: b'{"groupList":["CG","CG2"]}',
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: b'{"topicList":["TBW102","SELF_TEST_TOPIC"]}',
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: b'{"consumerIdList":["10.0.0.1@1234#5678"]}',
    RequestCode.GET_PRODUCER_CONNECTION_LIST: (
        b'{"connectionSet":[{"clientAddr":"10.0.0.1:54321","clientId":"10.0.0.1@1234#5678",'
        b'"language":"CPP","version":407}]}'),
    RequestCode.GET_BROKER_RUNTIME_INFO: (
        b'{"table":{"brokerVersionDesc":"V4_9_7","putTps":"1.50 1.20 0.90",'
        b'"commitLogDirCapacity":"Total : 100.0 GiB, Free : 50.0 GiB."}}'),
    RequestCode.VIEW_BROKER_STATS_DATA: (
        b'{"statsDay":{"avgpt":1.0,"sum":30,"tps":0.01},"statsHour":{"avgpt":1.0,"sum":20,'
        b'"tps":0.1},"statsMinute":{"avgpt":1.0,"sum":10,"tps":0.5}}'),
    RequestCode.GET_BROKER_CONFIG: (  # MixAll.properties2String: unescaped key=value lines
        b"brokerName=broker-a\nbrokerClusterName=DefaultCluster\n"
        b"namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\nbrokerIP1=10.0.0.1\n"),
}
# Answers with no body (mutations) or with a header only.
EMPTY = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_SUBSCRIPTIONGROUP,
         RequestCode.UPDATE_BROKER_CONFIG)
HEADERS: dict[int, dict[str, str]] = {
    RequestCode.GET_MAX_OFFSET: {"offset": "42"},
    RequestCode.GET_EARLIEST_MSG_STORETIME: {"timestamp": "1700000000000"},
    RequestCode.GET_BROKER_CONFIG: {"version": '{"counter":2,"timestamp":1700000000000}'},
}


def mq(queue_id: int = 0) -> MessageQueue:
    return MessageQueue("T", "broker-a", queue_id)


def record(body: bytes, keys: str, *, topic: str = "T", sysflag: int = 0,
           uniq: str = "C0A8010A00002A9F0000000000000001") -> bytes:
    props = f"KEYS\x01{keys}\x02UNIQ_KEY\x01{uniq}\x02TAGS\x01A"
    return encode_record(topic=topic, body=body, properties=props, sysflag=sysflag,
                         store_host=("192.168.1.10", 10911), physical_offset=100)


@pytest.fixture
async def apache(fake_namesrv: FakeServer) -> tuple[str, Requests]:
    """A fake Apache broker: its address, and the last request of each code it got."""
    seen: Requests = {}

    def answer(cmd: RemotingCommand) -> RemotingCommand:
        seen[cmd.code] = cmd
        return cmd.response(ext_fields=HEADERS.get(cmd.code), body=BODIES.get(cmd.code))

    def query(cmd: RemotingCommand) -> RemotingCommand:
        seen[cmd.code] = cmd
        body = (record(b"plain", "k1 k2")
                + record(zlib.compress(b"inflated"), "k1", sysflag=COMPRESSED_FLAG)
                + record(b"collision", "other")  # same index slot, another key
                + record(b"other topic", "k1", topic="T2"))
        return cmd.response(ext_fields={"indexLastUpdateTimestamp": "1700000000000",
                                        "indexLastUpdatePhyoffset": "4096"}, body=body)

    handlers: dict[int, Handler] = {code: answer for code in (*BODIES, *EMPTY, *HEADERS)}
    handlers[RequestCode.QUERY_MESSAGE] = query
    return await fake_namesrv(handlers), seen


async def test_offset_tables_keyed_by_message_queue(apache: tuple[str, Requests],
                                                    broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    stats = await broker_admin.consume_stats(addr, "CG", "T")
    assert stats.offset_table == {mq(): OffsetWrapper(10, 5, 1700000000000, 6)}
    assert stats.consume_tps == 1.5
    assert seen[RequestCode.GET_CONSUME_STATS].ext_fields == {"consumerGroup": "CG", "topic": "T"}

    topic = await broker_admin.topic_stats(addr, "T")
    assert topic.offset_table == {mq(1): TopicOffset(0, 100, 1700000000000)}

    reset = await broker_admin.reset_offset(addr, "T", "CG", 1700000000000, cpp_clients=True)
    assert reset == {mq(0): 5, mq(1): 7}
    sent = seen[RequestCode.INVOKE_BROKER_TO_RESET_OFFSET]
    assert sent.language == LanguageCode.CPP
    assert sent.ext_fields == {"topic": "T", "group": "CG", "timestamp": "1700000000000",
                               "isForce": "true"}

    status = await broker_admin.consumer_status(addr, "T", "CG")
    assert status.consumer_table == {"10.0.0.1@1234#5678": {mq(): 5}}

    listing = await broker_admin.broker_consume_stats(addr, order_only=True)
    assert seen[RequestCode.GET_BROKER_CONSUME_STATS].ext_fields == {"isOrder": "true"}
    assert (listing.broker_addr, listing.total_diff) == ("192.168.1.10:10911", 5)
    [[per_topic]] = [entry["CG"] for entry in listing.consume_stats_list]
    assert per_topic.offset_table == {mq(): OffsetWrapper(10, 5, 1700000000000)}

    [span] = await broker_admin.consume_time_span(addr, "T", "CG")
    assert (span.message_queue, span.delay_time, span.max_time_stamp) == (mq(), 25,
                                                                          1700000001000)


async def test_integer_keys(apache: tuple[str, Requests], broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    assert await broker_admin.correction_offsets(addr, "T", "CG", filter_groups=("A", "B")) == {
        0: 5, 1: 2**63 - 1}
    assert seen[RequestCode.QUERY_CORRECTION_OFFSET].ext_fields == {
        "compareGroup": "CG", "topic": "T", "filterGroups": "A,B"}
    offsets = await broker_admin.all_consumer_offsets(addr)
    assert offsets.offset_table == {"T@CG": {0: 10, 1: 12}}
    delay = await broker_admin.all_delay_offsets(addr)
    assert (delay.text, delay.offset_table) == ('{"offsetTable":{1:2,3:5}}', {1: 2, 3: 5})


async def test_clients_and_their_reports(apache: tuple[str, Requests],
                                         broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    connections = await broker_admin.consumer_connections(addr, "CG")
    [conn] = connections.connection_set
    assert (conn.client_id, conn.language, conn.version) == ("10.0.0.1@1234#5678",
                                                             LanguageCode.JAVA, 407)
    assert (connections.consume_type, connections.message_model) == (
        ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING)
    assert connections.subscription_table["T"].tags_set == {"TagA", "TagB"}

    [producer] = (await broker_admin.producer_connections(addr, "PG")).connection_set
    assert producer.language == LanguageCode.CPP
    assert await broker_admin.consumer_ids(addr, "CG") == ["10.0.0.1@1234#5678"]

    info = await broker_admin.consumer_running_info(addr, "CG", "10.0.0.1@1234#5678",
                                                    jstack=True)
    assert seen[RequestCode.GET_CONSUMER_RUNNING_INFO].ext_fields == {
        "consumerGroup": "CG", "clientId": "10.0.0.1@1234#5678", "jstackEnable": "true"}
    assert info.mq_table[mq()].cached_msg_count == 2
    assert info.status_table["T"].consume_ok_tps == 1.5
    assert info.properties["PROP_THREADPOOL_CORE_SIZE"] == "20"
    assert info.jstack == '"main" RUNNABLE'
    assert [s.topic for s in info.subscription_set] == ["T"]

    offset_id = "C0A8010A00002A9F0000000000000064"
    result = await broker_admin.consume_message_directly(addr, "CG", "cid", offset_id)
    assert (result.consume_result, result.remark, result.auto_commit) == (
        CMResult.CR_SUCCESS, "ok", True)
    assert seen[RequestCode.CONSUME_MESSAGE_DIRECTLY].ext_fields == {
        "consumerGroup": "CG", "clientId": "cid", "msgId": offset_id}


async def test_topic_and_group_tables_with_5x_fields(apache: tuple[str, Requests],
                                                     broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    topics = await broker_admin.all_topic_config(addr)
    assert topics.topic_config_table == {"T": TopicConfig("T", 4, 4)}
    assert topics.data_version.counter == 3
    groups = await broker_admin.all_group_config(addr)
    assert groups.subscription_group_table == {"CG": SubscriptionGroupConfig("CG")}
    assert (await broker_admin.topic_consumed_by(addr, "T")).group_list == {"CG", "CG2"}
    assert (await broker_admin.system_topics(addr)).topic_list == ["TBW102", "SELF_TEST_TOPIC"]

    await broker_admin.create_topic(addr, TopicConfig("T", 8, 8, order=True))
    assert seen[RequestCode.UPDATE_AND_CREATE_TOPIC].ext_fields == {
        "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "true", "topicSysFlag": "0"}
    await broker_admin.delete_group(addr, "CG", remove_offsets=True)
    assert seen[RequestCode.DELETE_SUBSCRIPTIONGROUP].ext_fields == {
        "groupName": "CG", "removeOffset": "true", "cleanOffset": "true"}


async def test_broker_settings_and_figures(apache: tuple[str, Requests],
                                           broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    config = await broker_admin.broker_config(addr)
    assert config["namesrvAddr"] == "10.0.0.1:9876;10.0.0.2:9876"
    assert list(config)[:2] == ["brokerName", "brokerClusterName"]
    await broker_admin.update_broker_config(addr, {"autoCreateTopicEnable": False,
                                                   "storePathRootDir": "C:\\store"})
    sent = (seen[RequestCode.UPDATE_BROKER_CONFIG].body or b"").decode()
    assert sent == "autoCreateTopicEnable=false\nstorePathRootDir=C\\:\\\\store\n"

    table = (await broker_admin.runtime_info(addr)).table
    assert float(table["putTps"].split()[0]) == 1.5
    stats = await broker_admin.broker_stats(addr, "TOPIC_PUT_NUMS", "T")
    assert (stats.stats_minute.sum, stats.stats_hour.tps, stats.stats_day.sum) == (10, 0.1, 30)
    assert seen[RequestCode.VIEW_BROKER_STATS_DATA].ext_fields == {
        "statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}
    assert await broker_admin.max_offset(addr, "T", 3) == 42
    assert await broker_admin.earliest_msg_store_time(addr, "T", 3) == 1700000000000


async def test_query_message_keeps_only_matching_records(apache: tuple[str, Requests],
                                                         broker_admin: BrokerAdmin) -> None:
    addr, seen = apache
    found = await broker_admin.query_message(addr, "T", "k1", max_num=16, begin=5, end=6)
    assert [m.body for m in found.messages] == [b"plain", b"inflated"]
    assert (found.index_last_update_timestamp, found.index_last_update_phyoffset) == (
        1700000000000, 4096)
    assert seen[RequestCode.QUERY_MESSAGE].ext_fields == {
        "topic": "T", "key": "k1", "maxNum": "16", "beginTimestamp": "5", "endTimestamp": "6"}

    uniq = "C0A8010A00002A9F0000000000000001"
    by_id = await broker_admin.query_message_by_unique_key(addr, "T", uniq)
    assert [m.body for m in by_id] == [b"plain", b"inflated", b"collision"]
    assert (seen[RequestCode.QUERY_MESSAGE].ext_fields or {})["_UNIQUE_KEY_QUERY"] == "true"
