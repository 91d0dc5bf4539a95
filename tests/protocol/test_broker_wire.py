"""Broker headers and bodies against the spec's Java output and the captured client frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.protocol import fastjson
from engine.protocol.body.admin import (
    CMResult,
    Connection,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    ConsumeStatus,
    GetConsumerListByGroupResponseBody,
    GetConsumerStatusBody,
    GroupList,
    OffsetWrapper,
    ProcessQueueInfo,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QueueTimeSpan,
    ResetOffsetBody,
    TopicOffset,
    TopicStatsTable,
)
from engine.protocol.body.check_client import CheckClientRequestBody
from engine.protocol.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
    java_string_hash,
)
from engine.protocol.body.lock import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.offsets import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
    split_topic_at_group,
    topic_at_group,
)
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.route import KVTable, TopicList
from engine.protocol.body.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from engine.protocol.body.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
)
from engine.protocol.codes import LanguageCode
from engine.protocol.errors import HeaderError
from engine.protocol.frame import FrameDecoder
from engine.protocol.header import broker as h
from engine.protocol.wire import from_ext, from_json, to_ext, to_json

from .golden import GoldenFrame, golden_frames

MQ0 = MessageQueue("TopicTest", "broker-a", 0)
CID = "10.0.0.1@1234#5678"
SUB = SubscriptionData("TopicTest", "TagA || TagB", frozenset({"TagA", "TagB"}),
                       frozenset({2598919, 2598920}), 1700000000000)
CONN = Connection("10.0.0.1@1234#5678", "10.0.0.1:54321", LanguageCode.JAVA, 407)
GROUP_CONFIG_TEXT = (
    '{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
    '"consumeFromMinEnable":true,"groupName":"CG","notifyConsumerIdsChangedEnable":true,'
    '"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
)
TOPIC_CONFIG_TEXT = (
    '{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    '"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}'
)

# Every body example of request-codes.md §5.3-5.12 (and the offset bodies of §2), as the
# dataclass that must encode to exactly that fastjson text.
EXAMPLES: list[tuple[Any, str]] = [
    (HeartbeatData(CID, frozenset({ProducerData("PG")}), frozenset({ConsumerData(
        "CG", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, frozenset({SUB}))})),
     '{"clientID":"10.0.0.1@1234#5678","consumerDataSet":[{"consumeFromWhere":'
     '"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG",'
     '"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,'
     '"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
     '"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],'
     '"unitMode":false}],"producerDataSet":[{"groupName":"PG"}]}'),
    (ConsumeStats({MQ0: OffsetWrapper(100, 90, 1700000000000)}, 1.5),
     '{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
     '{"brokerOffset":100,"consumerOffset":90,"lastTimestamp":1700000000000}}}'),
    (TopicStatsTable({MessageQueue("TopicTest", "broker-a", 1): TopicOffset(0, 100,
                                                                           1700000000000)}),
     '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
     '{"lastUpdateTimestamp":1700000000000,"maxOffset":100,"minOffset":0}}}'),
    (ConsumerConnection(frozenset({CONN}), {"TopicTest": SUB}, ConsumeType.CONSUME_PASSIVELY,
                        MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
     '{"connectionSet":[{"clientAddr":"10.0.0.1:54321","clientId":"10.0.0.1@1234#5678",'
     '"language":"JAVA","version":407}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
     '"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":'
     '{"TopicTest":{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG",'
     '"subString":"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],'
     '"topic":"TopicTest"}}}'),
    (ProducerConnection(frozenset({CONN})),
     '{"connectionSet":[{"clientAddr":"10.0.0.1:54321","clientId":"10.0.0.1@1234#5678",'
     '"language":"JAVA","version":407}]}'),
    (TopicConfig("TopicTest", 4, 4), TOPIC_CONFIG_TEXT),
    (TopicConfigSerializeWrapper({"TopicTest": TopicConfig("TopicTest", 4, 4)},
                                 DataVersion(1700000000000, 3)),
     '{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":'
     + TOPIC_CONFIG_TEXT + "}}"),
    (RegisterBrokerBody(TopicConfigSerializeWrapper(
        {"TopicTest": TopicConfig("TopicTest", 4, 4)}, DataVersion(1700000000000, 3))),
     '{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
     '"timestamp":1700000000000},"topicConfigTable":{"TopicTest":' + TOPIC_CONFIG_TEXT + "}}}"),
    (SubscriptionGroupConfig("CG"), GROUP_CONFIG_TEXT),
    (SubscriptionGroupWrapper({"CG": SubscriptionGroupConfig("CG")},
                              DataVersion(1700000000000, 3)),
     '{"dataVersion":{"counter":3,"timestamp":1700000000000},"subscriptionGroupTable":{"CG":'
     + GROUP_CONFIG_TEXT + "}}"),
    (KVTable({"k1": "v1"}), '{"table":{"k1":"v1"}}'),
    (LockBatchRequestBody("CG", CID, frozenset({MQ0})),
     '{"clientId":"10.0.0.1@1234#5678","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a",'
     '"queueId":0,"topic":"TopicTest"}]}'),
    (LockBatchResponseBody(frozenset({MQ0})),
     '{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'),
    (UnlockBatchRequestBody("CG", "cid", frozenset({MQ0})),
     '{"clientId":"cid","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a","queueId":0,'
     '"topic":"TopicTest"}]}'),
    (MQ0, '{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}'),
    (TopicList(["TopicTest"]), '{"topicList":["TopicTest"]}'),
    (TopicList(["TopicTest"], "10.0.0.1:10911"),
     '{"brokerAddr":"10.0.0.1:10911","topicList":["TopicTest"]}'),
    (GroupList(frozenset({"CG"})), '{"groupList":["CG"]}'),
    (ResetOffsetBody({MQ0: 5}),
     '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:5}}'),
    (GetConsumerListByGroupResponseBody([CID]), '{"consumerIdList":["10.0.0.1@1234#5678"]}'),
    (ConsumerOffsetSerializeWrapper({"topic@group": {0: 10}}),
     '{"offsetTable":{"topic@group":{0:10}}}'),
    (DelayOffsetSerializeWrapper({1: 2, 3: 5}), '{"offsetTable":{1:2,3:5}}'),
    (QueryCorrectionOffsetBody({0: 5, 1: 7}), '{"correctionOffsets":{0:5,1:7}}'),
]


def _ids() -> list[str]:
    return [f"{type(value).__name__}-{n}" for n, (value, _) in enumerate(EXAMPLES)]


@pytest.mark.parametrize(("value", "text"), EXAMPLES, ids=_ids())
def test_body_examples_match_java_byte_for_byte(value: Any, text: str) -> None:
    assert fastjson.dumps(to_json(value)) == text
    assert from_json(type(value), fastjson.loads(text)) == value
    standard = fastjson.dumps(to_json(value), standard=True)
    assert from_json(type(value), fastjson.loads(standard)) == value


def test_standard_form_quotes_object_and_number_keys() -> None:
    standard = fastjson.dumps(to_json(ResetOffsetBody({MQ0: 5})), standard=True)
    assert standard == (
        '{"offsetTable":{"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,'
        '\\"topic\\":\\"TopicTest\\"}":5}}'
    )
    assert fastjson.dumps(to_json(DelayOffsetSerializeWrapper({1: 2})), standard=True) == (
        '{"offsetTable":{"1":2}}'
    )


def test_bodies_without_spec_text_round_trip_in_both_forms() -> None:
    mq1 = MessageQueue("TopicTest", "broker-a", 1)
    values: list[Any] = [
        ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMEORDERLY": "false"},
            subscription_set=[SUB],
            mq_table={MQ0: ProcessQueueInfo(commit_offset=10, cached_msg_size_in_mib=2,
                                            locked=True, droped=False)},
            status_table={"TopicTest": ConsumeStatus(1.5, 2.0, 3.25, 4.0, 0.0, 7)},
            jstack="thread dump",
        ),
        ConsumeMessageDirectlyResult(True, False, CMResult.CR_LATER, "slow", 12),
        GetConsumerStatusBody({MQ0: 5}, {CID: {MQ0: 5, mq1: 6}}),
        QueryConsumeTimeSpanBody([QueueTimeSpan(MQ0, 1, 2, 3, 4)]),
        ConsumeStatsList([{"CG": [ConsumeStats({MQ0: OffsetWrapper(3, 1, 0)}, 0.0)]}],
                         "10.0.0.1:10911", 2),
        ProducerTableInfo({"PG": [ProducerInfo(CID, "10.0.0.1", LanguageCode.CPP, 63, 9)]}),
        CheckClientRequestBody(CID, "CG", SubscriptionData.build(
            "T", "a > 1", ExpressionType.SQL92, sub_version=5)),
    ]
    for value in values:
        for standard in (False, True):
            text = fastjson.dumps(to_json(value), standard=standard)
            assert from_json(type(value), fastjson.loads(text)) == value, text
    info = to_json(values[0])
    assert set(info["statusTable"]["TopicTest"]) == {
        "pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs"}
    [pq] = info["mqTable"].values()
    assert pq["cachedMsgSizeInMiB"] == 2 and pq["droped"] is False
    assert to_json(values[1])["consumeResult"] == "CR_LATER"
    assert to_json(values[1])["spentTimeMills"] == 12
    assert "remoteIP" in to_json(values[5])["data"]["PG"][0]


def test_java_time_span_strings_are_read() -> None:
    text = ('{"consumeTimeSpanSet":[{"consumeTimeStamp":3,"consumeTimeStampStr":"x","delayTime":4,'
            '"maxTimeStamp":2,"maxTimeStampStr":"y","messageQueue":{"brokerName":"broker-a",'
            '"queueId":0,"topic":"TopicTest"},"minTimeStamp":1,"minTimeStampStr":"z"}]}')
    [span] = from_json(QueryConsumeTimeSpanBody, fastjson.loads(text)).consume_time_span_set
    assert span.message_queue == MQ0
    assert (span.min_time_stamp, span.max_time_stamp_str) == (1, "y")


def test_message_queue_orders_as_java_compare_to() -> None:
    queues = [MessageQueue("B", "a", 0), MessageQueue("A", "b", 0), MessageQueue("A", "a", 10),
              MessageQueue("A", "a", 2)]
    assert sorted(queues) == [MessageQueue("A", "a", 2), MessageQueue("A", "a", 10),
                              MessageQueue("A", "b", 0), MessageQueue("B", "a", 0)]
    assert {MessageQueue("A", "a", 2): 1}[MessageQueue("A", "a", 2)] == 1


@pytest.mark.parametrize(("text", "code"), [
    ("TagA", 2598919), ("TagB", 2598920), ("", 0), ("中", 20013),
    ("\U0001F600", 0xD83D * 31 + 0xDE00), ("polygenelubricants", -(2**31)),
])
def test_java_string_hash(text: str, code: int) -> None:
    assert java_string_hash(text) == code


def test_subscription_built_like_filter_api() -> None:
    assert SubscriptionData.build("TopicTest", "TagA || TagB", sub_version=1700000000000) == SUB
    everything = SubscriptionData.build("T", "", sub_version=1)
    assert everything.sub_string == "*" and everything.is_sub_all
    assert everything.tags_set == frozenset() == everything.code_set
    sql = SubscriptionData.build("T", "a > 1", ExpressionType.SQL92, sub_version=1)
    assert sql.expression_type is ExpressionType.SQL92 and not sql.tags_set
    no_codes = SubscriptionData("TopicTest", "TagA || TagB", frozenset({"TagA", "TagB"}),
                                sub_version=1700000000000)
    assert no_codes.with_codes() == SUB


def test_offset_table_keys() -> None:
    assert topic_at_group("T", "G") == "T@G"
    assert split_topic_at_group("T@G") == ("T", "G")
    assert split_topic_at_group("T@G@X") is None


# ---------------------------------------------------------------------------- headers

HEADERS: list[Any] = [
    h.SendMessageRequestHeader("PG", "T", "TBW102", 4, 1, 0, 1700000000000, 0, "TAGS\x01a",
                               0, False, True, 16, "broker-a"),
    h.SendMessageRequestHeaderV2("PG", "T", "TBW102", 4, 1, 0, 1700000000000, 0, None, None,
                                 False, None, True, "broker-a"),
    h.SendMessageResponseHeader("C0A8000100002A9F0000000000000000", 1, 42),
    h.PullMessageRequestHeader("CG", "T", 0, 0, 32, 6, -1, 15000, 1700000000000, "*", "TAG",
                               "broker-a"),
    h.PullMessageResponseHeader(0, 10, 0, 10),
    h.QueryMessageRequestHeader("T", "k", 32, 0, 1700000000000),
    h.QueryMessageResponseHeader(1700000000000, 4096),
    h.QueryConsumerOffsetRequestHeader("CG", "T", 0, "broker-a"),
    h.QueryConsumerOffsetResponseHeader(7),
    h.UpdateConsumerOffsetRequestHeader("CG", "T", 0, 8, "broker-a"),
    h.CreateTopicRequestHeader("T", "TBW102", 8, 8, 6, TopicFilterType.SINGLE_TAG, False, 0),
    h.SearchOffsetRequestHeader("T", 0, 1700000000000),
    h.SearchOffsetResponseHeader(3),
    h.GetMaxOffsetRequestHeader("T", 0),
    h.GetMaxOffsetResponseHeader(10),
    h.GetMinOffsetRequestHeader("T", 0),
    h.GetMinOffsetResponseHeader(0),
    h.GetEarliestMsgStoretimeRequestHeader("T", 0),
    h.GetEarliestMsgStoretimeResponseHeader(1700000000000),
    h.ViewMessageRequestHeader(4096),
    h.UnregisterClientRequestHeader(CID, "PG", None),
    h.ConsumerSendMsgBackRequestHeader(4096, "CG", 0, "MSGID", "T", False, 16, "broker-a"),
    h.EndTransactionRequestHeader("PG", 5, 4096, h.TRANSACTION_COMMIT_TYPE, "MSGID", True,
                                  "TXID", "broker-a"),
    h.GetConsumerListByGroupRequestHeader("CG"),
    h.CheckTransactionStateRequestHeader(5, 4096, "UNIQ", "UNIQ", "OFFSETID"),
    h.NotifyConsumerIdsChangedRequestHeader("CG"),
    h.GetTopicStatsInfoRequestHeader("T"),
    h.GetConsumerConnectionListRequestHeader("CG"),
    h.GetProducerConnectionListRequestHeader("PG"),
    h.DeleteSubscriptionGroupRequestHeader("CG", True),
    h.GetConsumeStatsRequestHeader("CG", "T"),
    h.DeleteTopicRequestHeader("T"),
    h.ResetOffsetRequestHeader("T", "CG", -1, True),
    h.GetConsumerStatusRequestHeader("T", "CG", "10.0.0.1:5555"),
    h.QueryTopicConsumeByWhoRequestHeader("T"),
    h.QueryConsumeTimeSpanRequestHeader("T", "CG"),
    h.GetConsumerRunningInfoRequestHeader("CG", CID, True),
    h.QueryCorrectionOffsetHeader("CG", "T", "G1,G2"),
    h.ConsumeMessageDirectlyResultRequestHeader("CG", CID, "MSGID", "broker-a"),
    h.CloneGroupOffsetRequestHeader("CG", "CG2", "T", True),
    h.ViewBrokerStatsDataRequestHeader("TOPIC_PUT_NUMS", "T"),
    h.GetConsumeStatsInBrokerHeader(True),
    h.QueryConsumeQueueRequestHeader("T", 0, 0, 10, "CG"),
]


@pytest.mark.parametrize("header", HEADERS, ids=[type(x).__name__ for x in HEADERS])
def test_headers_round_trip_through_ext_fields(header: Any) -> None:
    ext = to_ext(header)
    assert all(isinstance(v, str) for v in ext.values())
    assert from_ext(type(header), ext) == header


def test_header_keys_are_java_field_names() -> None:
    assert to_ext(h.UnregisterClientRequestHeader(CID)) == {"clientID": CID}
    assert to_ext(h.ResetOffsetRequestHeader("T", "CG", -1, True)) == {
        "topic": "T", "group": "CG", "timestamp": "-1", "isForce": "true"}
    assert to_ext(h.GetConsumeStatsInBrokerHeader()) == {"isOrder": "false"}
    assert to_ext(h.CreateTopicRequestHeader("T", "TBW102", 8, 8, 6,
                                             TopicFilterType.MULTI_TAG, True)) == {
        "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
        "perm": "6", "topicFilterType": "MULTI_TAG", "order": "true"}
    ext = to_ext(h.DeleteSubscriptionGroupRequestHeader("CG"))
    assert ext == {"groupName": "CG", "removeOffset": "false"}
    # Java primitives are always written; nullable objects only when set.
    assert to_ext(h.SendMessageRequestHeader("PG", "T", "TBW102", 4, 0, 0, 1, 0)) == {
        "producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1",
        "flag": "0", "unitMode": "false", "batch": "false"}


def test_missing_required_header_fields_raise() -> None:
    with pytest.raises(HeaderError, match="'clientID'"):
        from_ext(h.UnregisterClientRequestHeader, {"producerGroup": "PG"})
    with pytest.raises(HeaderError, match="'perm'"):
        from_ext(h.CreateTopicRequestHeader, {
            "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
            "topicFilterType": "SINGLE_TAG"})
    # `order` is @CFNotNull in Java but never read by 4.9.7: its absence is tolerated.
    assert not from_ext(h.CreateTopicRequestHeader, {
        "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
        "perm": "6", "topicFilterType": "SINGLE_TAG"}).order
    # Java primitives default even when absent.
    assert from_ext(h.ResetOffsetRequestHeader, {"topic": "T", "group": "CG"}) == (
        h.ResetOffsetRequestHeader("T", "CG", 0, False))
    assert from_ext(h.QueryConsumeQueueRequestHeader, {}) == h.QueryConsumeQueueRequestHeader()


# ---------------------------------------------------------------------------- golden captures


def _decoded(golden_dir: Path, prefix: str, code: int) -> list[tuple[GoldenFrame, Any]]:
    """Golden frames of one code, decoded the way the server sees them."""
    out = []
    for g in golden_frames(golden_dir):
        if g.source.startswith(prefix) and g.header["code"] == code:
            [cmd] = FrameDecoder().feed(g.frame)
            out.append((g, cmd))
    assert out, (prefix, code)
    return out


def test_java_v2_send_headers_convert_to_v1_and_back(golden_dir: Path) -> None:
    frames = _decoded(golden_dir, "java", 310) + _decoded(golden_dir, "java", 320)
    for g, cmd in frames:
        v2 = from_ext(h.SendMessageRequestHeaderV2, cmd.ext_fields)
        assert to_ext(v2) == g.header["extFields"]  # Java writes exactly these keys
        v1 = h.send_header_v1(v2)
        assert v1.producer_group == "PeerProducerGroup_java"
        assert (v1.topic, v1.default_topic, v1.default_topic_queue_nums) == (
            "StubTopic", "TBW102", 4)
        assert v1.bname == "stub-broker" and v1.reconsume_times == 0
        assert v1.batch is (g.header["code"] == 320)
        assert v1.properties is not None and "WAIT\x01true" in v1.properties
        assert h.send_header_v2(v1) == v2
        assert from_ext(h.SendMessageRequestHeader, to_ext(v1)) == v1


def test_cpp_v1_send_headers(golden_dir: Path) -> None:
    frames = _decoded(golden_dir, "cpp1-producer", 10)
    assert len(frames) == 3
    for g, cmd in frames:
        assert g.header["extFields"]["defaultTopicQueueNums"] == 4  # a JSON number on the wire
        assert cmd.ext_fields["defaultTopicQueueNums"] == "4"
        v1 = from_ext(h.SendMessageRequestHeader, cmd.ext_fields)  # AccessKey etc. ignored
        assert (v1.producer_group, v1.topic, v1.default_topic_queue_nums) == (
            "PeerProducerGroup_cpp", "StubTopic", 4)
        assert v1.born_timestamp == int(g.header["extFields"]["bornTimestamp"])
        # The C++ client writes booleans as "0"/"1"; Java's Boolean.parseBoolean reads both
        # as false, so a Java broker stores a C++ batch as one message (client-cpp #363).
        assert v1.unit_mode is False and v1.batch is False
        assert v1.reconsume_times == 0 and v1.bname is None
        assert h.send_header_v1(h.send_header_v2(v1)) == v1


def test_heartbeat_bodies_of_both_clients_parse(golden_dir: Path) -> None:
    java = _decoded(golden_dir, "java", 34)
    cpp = _decoded(golden_dir, "cpp1", 34)
    for g, cmd in java + cpp:
        hb = from_json(HeartbeatData, fastjson.loads(cmd.body))
        assert hb.client_id and hb.consumer_data_set, g.source
        [consumer] = hb.consumer_data_set
        assert consumer.message_model is MessageModel.CLUSTERING
        for sub in consumer.subscription_data_set:
            assert sub.sub_string == "*" and sub.sub_version > 1_700_000_000_000
            assert sub.expression_type is ExpressionType.TAG and not sub.tags_set
        again = fastjson.dumps(to_json(hb))
        assert from_json(HeartbeatData, fastjson.loads(again)) == hb
        if g.source.startswith("java"):
            assert ProducerData("CLIENT_INNER_PRODUCER") in hb.producer_data_set
            assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            assert len(again) == len(g.body)  # same text, arrays maybe in another order
        else:
            # C++: enum ordinals, subVersion as a string, absent sets and flags.
            assert b'"consumeType":1' in g.body or b'"consumeType":0' in g.body
            assert b"subscriptionDataSet" not in g.body or b'"subVersion":"' in g.body
            assert hb.producer_data_set == frozenset()
            assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            assert consumer.unit_mode is False
    push = {hb.client_id: hb for hb in (from_json(HeartbeatData, fastjson.loads(c.body))
                                        for g, c in cpp if "pull" not in g.source)}
    for hb in push.values():
        [consumer] = hb.consumer_data_set
        assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
        topics = {s.topic for s in consumer.subscription_data_set}
        assert topics == {"StubTopic", f"%RETRY%{consumer.group_name}"}
    [(_, pull_cmd)] = _decoded(golden_dir, "cpp1-consumer-pull", 34)
    [pull] = from_json(HeartbeatData, fastjson.loads(pull_cmd.body)).consumer_data_set
    assert pull.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert pull.subscription_data_set == frozenset()


def test_lock_and_unlock_bodies_of_both_clients_parse(golden_dir: Path) -> None:
    for prefix in ("java", "cpp1"):
        for g, cmd in _decoded(golden_dir, prefix, 41):
            body = from_json(LockBatchRequestBody, fastjson.loads(cmd.body))
            assert body.client_id and body.consumer_group.startswith("PeerOrderlyGroup_")
            assert body.mq_set and all(mq.broker_name == "stub-broker" for mq in body.mq_set)
            assert fastjson.loads(fastjson.dumps(to_json(body)))["mqSet"] == sorted(
                fastjson.loads(g.body)["mqSet"],
                key=lambda mq: (mq["brokerName"], mq["queueId"], mq["topic"]))
        for _, cmd in _decoded(golden_dir, prefix, 42):
            unlock = from_json(UnlockBatchRequestBody, fastjson.loads(cmd.body))
            assert len(unlock.mq_set) >= 7


def test_fast_send_header_decoding_matches_the_general_path(golden_dir: Path) -> None:
    from engine.protocol.errors import HeaderError
    from engine.protocol.frame import FrameDecoder
    from engine.protocol.header.broker import (
        SendHeader,
        SendMessageRequestHeader,
        SendMessageRequestHeaderV2,
        decode_send_header_v1,
        decode_send_header_v2,
        send_header_v1,
    )
    from tests.protocol.golden import golden_frames

    seen = set()
    for g in golden_frames(golden_dir):
        code = g.header["code"]
        if code in (10, 310, 320):
            [cmd] = FrameDecoder().feed(g.frame)
            if code == 10:
                slow = from_ext(SendMessageRequestHeader, cmd.ext_fields)
                fast = decode_send_header_v1(cmd.ext_fields)
            else:
                slow = send_header_v1(from_ext(SendMessageRequestHeaderV2, cmd.ext_fields))
                fast = decode_send_header_v2(cmd.ext_fields)
            assert type(fast) is SendHeader
            assert fast == SendHeader.of(slow)
            seen.add(code)
    assert seen == {10, 310, 320}
    variants = [{"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "5",
                 "h": "0", "j": "", "k": "TRUE", "m": "false", "l": "3"}]
    for ext in variants:
        assert decode_send_header_v2(ext) == SendHeader.of(send_header_v1(
            from_ext(SendMessageRequestHeaderV2, ext)))
        v1 = to_ext(send_header_v1(from_ext(SendMessageRequestHeaderV2, ext)))
        assert decode_send_header_v1(v1) == decode_send_header_v2(ext)
    with pytest.raises(HeaderError, match=r"'b' \(topic\) is missing"):
        decode_send_header_v2({"a": "G"})
    with pytest.raises(HeaderError, match="'topic' is missing"):
        decode_send_header_v1({"producerGroup": "G"})
    with pytest.raises(HeaderError,
                       match=r"V2\.d \(defaultTopicQueueNums\): 'four' is not a valid int"):
        decode_send_header_v2({**variants[0], "d": "four"})
    v1 = to_ext(send_header_v1(from_ext(SendMessageRequestHeaderV2, variants[0])))
    for key, value in (("queueId", str(2**31)), ("bornTimestamp", str(-(2**63) - 1)),
                       ("reconsumeTimes", str(-(2**31) - 1))):
        with pytest.raises(HeaderError, match=f"{key}: .* out of range"):
            decode_send_header_v1({**v1, key: value})
