"""fastjson text, typed headers and bodies, against the spec's recorded Java output."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.protocol import fastjson
from engine.protocol.body.decode import decode_body, request_body, request_name
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.codes import LanguageCode, RequestCode
from engine.protocol.command import request
from engine.protocol.errors import BodyError, HeaderError
from engine.protocol.fastjson import ObjectKey
from engine.protocol.header.namesrv import RegisterBrokerRequestHeader
from engine.protocol.wire import from_ext, from_json, to_ext, to_json

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a",
                             {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"})],
)


def test_route_data_in_both_forms_matches_java() -> None:
    assert fastjson.dumps(to_json(ROUTE)) == (
        '{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},'
        '"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
        '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        '"writeQueueNums":4}]}'
    )
    assert fastjson.dumps(to_json(ROUTE), standard=True) == (
        '{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},'
        '"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
        '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        '"writeQueueNums":4}]}'
    )
    for standard in (False, True):
        text = fastjson.dumps(to_json(ROUTE), standard=standard)
        assert from_json(TopicRouteData, fastjson.loads(text)) == ROUTE


def test_cluster_info_matches_java() -> None:
    info = ClusterInfo({"broker-a": ROUTE.broker_datas[0]}, {"DefaultCluster": {"broker-a"}})
    assert fastjson.dumps(to_json(info)) == (
        '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.10:10911",'
        '1:"192.168.1.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},'
        '"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )


def test_register_body_plain_and_compressed() -> None:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {"TopicTest": TopicConfig("TopicTest", 4, 4)}, DataVersion(1700000000000, 3)))
    assert body.encode() == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
        b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
        b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest",'
        b'"topicSysFlag":0,"writeQueueNums":4}}}}'
    )
    packed = body.encode(compressed=True)
    assert zlib.decompress(packed) == (
        b"\0\0\0'{\"counter\":3,\"timestamp\":1700000000000}\0\0\0\x01\0\0\0\x1a"
        b"TopicTest 4 4 6 SINGLE_TAG\0\0\0\x02[]"
    )
    assert RegisterBrokerBody.decode(packed, compressed=True) == body
    assert RegisterBrokerBody.decode(body.encode()) == body
    assert RegisterBrokerBody.decode(b"") == RegisterBrokerBody()
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(b"not zlib", compressed=True)
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(zlib.compress(b"\0\0\0\x09{}"), compressed=True)


def test_null_is_read_only_where_the_type_is_optional() -> None:
    with pytest.raises(BodyError, match=r"^DataVersion: null where an object for DataVersion"):
        from_json(DataVersion, None)
    with pytest.raises(BodyError, match=r"^TopicConfig\.topicName: null where a str is expected$"):
        from_json(TopicConfig, {"topicName": None})
    with pytest.raises(BodyError, match=r"^DataVersion\.counter: null where an int is expected$"):
        from_json(DataVersion, {"counter": None})
    with pytest.raises(BodyError, match="null where an object for BrokerData is expected"):
        from_json(ClusterInfo, {"brokerAddrTable": {"b": None}})
    assert from_json(TopicRouteData, {"orderTopicConf": None}).order_topic_conf is None


@pytest.mark.parametrize(("data", "fault"), [
    (None, "has no body"),
    (b"", "has no body"),
    (b"null", "body is null"),
    (b"[]", "body is a JSON array, not an object"),
    (b"true", "body is a JSON boolean, not an object"),
    (b"1.5", "body is a JSON number, not an object"),
    (b"\xff", "body is not JSON (body is not UTF-8 text)"),
])
def test_a_body_that_is_no_object_is_refused_naming_the_request(
    data: bytes | None, fault: str
) -> None:
    with pytest.raises(BodyError) as info:
        request_body(request(RequestCode.QUERY_DATA_VERSION, None, data), DataVersion)
    assert str(info.value) == (f"QUERY_DATA_VERSION: the request {fault}; "
                               "it needs a DataVersion JSON body")


def test_a_wrongly_typed_field_names_the_field_and_the_request() -> None:
    with pytest.raises(BodyError) as info:
        decode_body(DataVersion, b'{"counter":[]}', "GET_ALL_TOPIC_CONFIG", "answer")
    assert str(info.value) == ("DataVersion.counter: '[]' is not a valid long "
                               "(GET_ALL_TOPIC_CONFIG answer body)")
    assert decode_body(DataVersion, b'{"counter":3}', "X") == DataVersion(counter=3)
    assert request_name(9999) == "request code 9999"


def test_fastjson_object_keys_and_pretty_files() -> None:
    key = ObjectKey({"topic": "T", "brokerName": "b", "queueId": 0})
    text = fastjson.dumps({"offsetTable": {key: 5}})
    assert text == '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}'
    assert fastjson.loads(text) == {"offsetTable": {key: 5}}
    assert fastjson.dumps({"offsetTable": {"T@CG": {0: 10, 1: 12}}}, pretty=True) == (
        '{\n\t"offsetTable":{\n\t\t"T@CG":{0:10,1:12\n\t\t}\n\t}\n}'
    )
    assert fastjson.loads('{"offsetTable":{1:2,3:5\n}}') == {"offsetTable": {1: 2, 3: 5}}


@pytest.mark.parametrize(("text", "expected"), [
    # strings that look like unquoted keys stay strings
    ('{"a":[{{"brokerName":"b","queueId":0,"topic":"T,{x}:"}:{"o":1}}],"s":",{\\"q\\":1}:"}',
     {"a": [{ObjectKey({"brokerName": "b", "queueId": 0, "topic": "T,{x}:"}): {"o": 1}}],
      "s": ',{"q":1}:'}),
    ('{-1:"x",7:[{3:{}}],"k":{}}', {-1: "x", 7: [{3: {}}], "k": {}}),
    ("{{}:1}", {ObjectKey({}): 1}),
    # what only the parser reads: single quotes, bare names, a spaced key object
    ("{'a':{'q':1}}", {"a": {"q": 1}}),
    ("{a:{b:2}}", {"a": {"b": 2}}),
    ('{ {"q":1} :2}', {ObjectKey({"q": 1}): 2}),
    ("{{'q':1}:2}", {ObjectKey({"q": 1}): 2}),
    # integers past Java's long stay exact (orjson would read them as floats)
    ('{"T@G":{0:-9223372036854775809,1:5}}', {"T@G": {0: -9223372036854775809, 1: 5}}),
    ('{"a":18446744073709551616}', {"a": 18446744073709551616}),
    # a key of the text's own that starts with a mark
    ('{1:2,"\\u0001x":3}', {1: 2, "\x01x": 3}),
])
def test_fastjson_unquoted_keys_read_alike_by_either_path(text: str, expected: object) -> None:
    assert fastjson.loads(text) == expected


@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=5) | st.integers(0, 99), inner, max_size=4),
    max_leaves=20,
))
def test_fastjson_round_trips(value: object) -> None:
    assert fastjson.loads(fastjson.dumps(value)) == value


@pytest.mark.parametrize("text", ["{", '{"a":}', "[1,", '{"a" 1}', "nul", '{"a":1}x', "\"abc"])
def test_fastjson_rejects_broken_text(text: str) -> None:
    with pytest.raises(BodyError):
        fastjson.loads(text)


def test_headers_round_trip_and_are_lenient() -> None:
    header = RegisterBrokerRequestHeader("broker-a", "10.0.0.1:10911", "C", "10.0.0.1:10912", 0,
                                         compressed=True, body_crc32=77)
    ext = to_ext(header)
    assert ext["bodyCrc32"] == "77"
    assert ext["compressed"] == "true"
    assert from_ext(RegisterBrokerRequestHeader, {**ext, "AccessKey": "x"}) == header
    with pytest.raises(HeaderError, match="'brokerAddr' is missing"):
        from_ext(RegisterBrokerRequestHeader, {k: v for k, v in ext.items() if k != "brokerAddr"})
    with pytest.raises(HeaderError, match="brokerId"):
        from_ext(RegisterBrokerRequestHeader, {**ext, "brokerId": "zero"})


@dataclass(frozen=True, slots=True)
class _WithEnum:
    language: LanguageCode
    flag: bool = False


def test_enums_by_name_or_number() -> None:
    assert from_ext(_WithEnum, {"language": "CPP"}).language == LanguageCode.CPP
    assert from_ext(_WithEnum, {"language": "3"}).language == LanguageCode.PYTHON
    assert from_json(_WithEnum, {"language": 9, "flag": "TRUE"}) == _WithEnum(LanguageCode.GO, True)
    with pytest.raises(HeaderError):
        from_ext(_WithEnum, {"language": "COBOL"})
