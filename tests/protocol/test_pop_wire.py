"""The 5.x POP wire values: headers, the batch-ack body and the receipt, as 5.3 writes them."""

from __future__ import annotations

import pytest

from engine.protocol.body.pop import (
    BatchAck,
    BatchAckMessageRequestBody,
    decode_bits,
    encode_bits,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.errors import BodyError, HeaderError
from engine.protocol.header.pop import (
    AckMessageRequestHeader,
    NotificationResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from engine.protocol.receipt import (
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfo,
    ReceiptError,
    build_extra_info,
    join_entries,
    msg_offset_entry,
    normal_topic,
    order_count_entry,
    order_count_offset_entry,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    pop_retry_topic,
    queue_key,
    queue_offset_key,
    retry_mark,
    start_offset_entry,
)
from engine.protocol.wire import from_ext, from_json, to_ext, to_json


def test_request_and_response_codes_are_5_3s():
    assert (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.PEEK_MESSAGE,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.NOTIFICATION,
            RequestCode.POLLING_INFO, RequestCode.BATCH_ACK_MESSAGE) == (
        200050, 200051, 200052, 200053, 200054, 200055, 200151)
    assert (ResponseCode.NO_MESSAGE, ResponseCode.POLLING_FULL,
            ResponseCode.POLLING_TIMEOUT) == (208, 209, 210)


def test_pop_header_uses_5_3_field_names():
    header = PopMessageRequestHeader("g", "t", -1, 32, 60_000, 20_000, 1_700_000_000_000, 0,
                                     exp_type="TAG", exp="a || b", order=True, attempt_id="x")
    ext = to_ext(header)
    assert ext == {"consumerGroup": "g", "topic": "t", "queueId": "-1", "maxMsgNums": "32",
                   "invisibleTime": "60000", "pollTime": "20000",
                   "bornTime": "1700000000000", "initMode": "0", "expType": "TAG",
                   "exp": "a || b", "order": "true", "attemptId": "x"}
    assert from_ext(PopMessageRequestHeader, ext) == header


def test_a_header_missing_a_required_field_is_refused():
    with pytest.raises(HeaderError):
        from_ext(AckMessageRequestHeader, {"consumerGroup": "g", "topic": "t", "queueId": "0",
                                           "extraInfo": "1 2 3 4 0 b 0"})


def test_response_headers_read_as_java_writes_them():
    resp = from_ext(PopMessageResponseHeader, {
        "popTime": "1", "invisibleTime": "2", "reviveQid": "3", "restNum": "4",
        "startOffsetInfo": "0 1 5", "msgOffsetInfo": "0 1 5,6"})
    assert resp.order_count_info is None and resp.rest_num == 4
    assert from_ext(NotificationResponseHeader, {"hasMsg": "true"}).has_msg


def test_bit_set_matches_java_to_byte_array():
    # BitSet {1, 3, 5}.toByteArray() == [0x2A]; fastjson writes byte[] as base64.
    assert encode_bits([1, 3, 5]) == "Kg=="
    assert encode_bits([8]) == "AAE="  # two bytes, little-endian
    assert encode_bits([]) == ""
    assert decode_bits("AAE=") == [8]
    with pytest.raises(BodyError):
        decode_bits("not base64!")


def test_batch_ack_body_round_trips_with_short_keys():
    ack = BatchAck("g", "t", "0", 100, 1, 3, 1_700_000_000_000, 60_000,
                   encode_bits([1, 3, 5]))
    json = to_json(BatchAckMessageRequestBody("broker-a", [ack]))
    assert json["acks"][0] == {"c": "g", "t": "t", "r": "0", "so": 100, "q": 1, "rq": 3,
                               "pt": 1_700_000_000_000, "it": 60_000, "b": "Kg=="}
    back = from_json(BatchAckMessageRequestBody, json)
    assert back.acks[0].offsets() == [101, 103, 105]


def test_receipt_is_extra_info_util_text():
    text = build_extra_info(5, 1000, 60_000, 3, "%RETRY%g_t", "broker-a", 2, 7)
    assert text == "5 1000 60000 3 1 broker-a 2 7"
    info = ExtraInfo.parse(text)
    assert info.topic("t", "g") == "%RETRY%g_t"
    assert info.revive_time == 61_000 and not info.is_order
    assert ExtraInfo.parse("5 1000 60000 999 0 b 2").queue_offset is None
    assert ExtraInfo.parse("5 1000 60000 999 0 b 2").is_order
    assert POP_ORDER_REVIVE_QUEUE == 999


@pytest.mark.parametrize("text", ["1 2 3", "a 2 3 4 0 b 1", "1 2 3 4 9 b 1"])
def test_a_bad_receipt_is_a_clear_error(text):
    with pytest.raises(ReceiptError):
        ExtraInfo.parse(text)


def test_pop_retry_topics_v1_and_v2():
    assert pop_retry_topic("t", "g") == "%RETRY%g_t"
    assert pop_retry_topic("t", "g", v2=True) == "%RETRY%g+t"
    assert [retry_mark(t) for t in ("t", "%RETRY%g_t", "%RETRY%g+t")] == ["0", "1", "2"]
    assert normal_topic("%RETRY%g_t", "g") == "t" == normal_topic("%RETRY%g+t", "g")
    assert normal_topic("t", "g") == "t"


def test_offset_infos_as_a_pop_answer_carries_them():
    start = join_entries([start_offset_entry("t", 1, 5), start_offset_entry("%RETRY%g_t", 0, 3)])
    msgs = join_entries([msg_offset_entry("t", 1, [5, 6, 7]),
                         msg_offset_entry("%RETRY%g_t", 0, [3])])
    assert start == "0 1 5;1 0 3"
    assert parse_start_offset_info(start) == {"0@1": 5, "1@0": 3}
    assert parse_msg_offset_info(msgs) == {"0@1": [5, 6, 7], "1@0": [3]}
    assert queue_key("%RETRY%g_t", 0) == "1@0"
    # 5.3's ExtraInfoUtilTest: a queue's count and one message's count side by side.
    counts = parse_order_count_info(join_entries([order_count_entry("TOPIC", 0, 1),
                                                  order_count_offset_entry("TOPIC", 0, 1234, 2)]))
    assert counts[queue_key("TOPIC", 0)] == 1
    assert counts[queue_offset_key("TOPIC", 0, 1234)] == 2
    assert parse_start_offset_info(None) == {} == parse_start_offset_info("")
    with pytest.raises(ReceiptError):
        parse_start_offset_info("0 1 5;0 1 6")
