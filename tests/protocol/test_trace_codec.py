"""Trace records against Apache's encoder: golden strings, 5.x field counts, Java's habits."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from engine.protocol.trace import (
    ConsumeReturnType,
    EndTransactionRecord,
    MessageType,
    PubRecord,
    RecallRecord,
    SubAfterRecord,
    SubBeforeRecord,
    decode,
    decode_record,
    encode,
    encode_batch,
    java_split,
)

C, F = "\u0001", "\u0002"  # TraceConstants.CONTENT_SPLITOR, FIELD_SPLITOR
MSG_ID = "AC1415116D1418B4AAC217FE1B4E0000"
OFFSET_ID = "0A9A002600002A9F0000000000002329"
T = 1700000000123

PUB = PubRecord(T, "DefaultRegion", "PID-test", "topic-test", MSG_ID, "Tags", "Keys",
                "127.0.0.1:10911", 26, 245, MessageType.NORMAL, OFFSET_ID, True)
# rocketmq-all-4.9.7 client/src/main/java/org/apache/rocketmq/client/trace/TraceDataEncoder.java,
# encoderFromContextBean, case Pub (the same literal as TraceDataEncoderTest.init):
# type, timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength,
# costTime, msgType.ordinal(), offsetMsgId, isSuccess, then FIELD_SPLITOR.
PUB_GOLDEN = (f"Pub{C}1700000000123{C}DefaultRegion{C}PID-test{C}topic-test{C}{MSG_ID}{C}Tags{C}"
              f"Keys{C}127.0.0.1:10911{C}26{C}245{C}0{C}{OFFSET_ID}{C}true{F}")

SUB_BEFORE = SubBeforeRecord(T, "DefaultRegion", "CID-test", "REQ1", MSG_ID, 2, "K1 K2")
# the same file and tag, case SubBefore: type, timeStamp, regionId, groupName, requestId,
# msgId, retryTimes, keys, then FIELD_SPLITOR.
SUB_BEFORE_GOLDEN = (f"SubBefore{C}1700000000123{C}DefaultRegion{C}CID-test{C}REQ1{C}{MSG_ID}{C}"
                     f"2{C}K1 K2{F}")

SUB_AFTER = SubAfterRecord("REQ1", MSG_ID, 17, False, "K1 K2", ConsumeReturnType.FAILED,
                           T + 20, "CID-test")
# the same file and tag, case SubAfter with AccessChannel.LOCAL: type, requestId, msgId,
# costTime, isSuccess, keys, contextCode, CONTENT_SPLITOR, timeStamp, CONTENT_SPLITOR,
# groupName, FIELD_SPLITOR.
SUB_AFTER_GOLDEN = (f"SubAfter{C}REQ1{C}{MSG_ID}{C}17{C}false{C}K1 K2{C}4{C}1700000000143{C}"
                    f"CID-test{F}")

END_TX = EndTransactionRecord(T, "DefaultRegion", "PID-test", "topic-test", MSG_ID, None,
                              None, "127.0.0.1:10911", MessageType.TRANS_COMMIT,
                              "transactionId", "COMMIT_MESSAGE", False)
# the same file and tag, case EndTransaction: type, timeStamp, regionId, groupName, topic,
# msgId, tags, keys, storeHost, msgType.ordinal(), transactionId, transactionState.name(),
# fromTransactionCheck, FIELD_SPLITOR; a message without tags or keys gets Java's "null".
END_TX_GOLDEN = (f"EndTransaction{C}1700000000123{C}DefaultRegion{C}PID-test{C}topic-test{C}"
                 f"{MSG_ID}{C}null{C}null{C}127.0.0.1:10911{C}2{C}transactionId{C}"
                 f"COMMIT_MESSAGE{C}false{F}")


def test_records_encode_as_apache_4_9_7_writes_them() -> None:
    assert encode(PUB) == PUB_GOLDEN
    assert encode(SUB_BEFORE) == SUB_BEFORE_GOLDEN
    assert encode(SUB_AFTER) == SUB_AFTER_GOLDEN
    assert encode(END_TX) == END_TX_GOLDEN


def test_golden_strings_decode_to_the_records() -> None:
    text = PUB_GOLDEN + SUB_BEFORE_GOLDEN + SUB_AFTER_GOLDEN + END_TX_GOLDEN
    decoded = decode(text.encode())
    assert decoded.records == [PUB, SUB_BEFORE, SUB_AFTER, END_TX]
    assert decoded.malformed == 0


def test_a_batch_keys_every_message_id_and_key_once() -> None:
    batch = encode_batch([PUB, SUB_BEFORE, SUB_AFTER])
    assert batch.body == (PUB_GOLDEN + SUB_BEFORE_GOLDEN + SUB_AFTER_GOLDEN).encode()
    assert batch.keys == (MSG_ID, "Keys", "K1", "K2")


def test_5x_records_decode() -> None:
    # rocketmq-all-5.3.3 TraceDataEncoder.decoderFromTraceDataString: a Pub with a 15th field
    # (clientHost), a SubAfter written for AccessChannel.CLOUD (no timestamp and group: the
    # record ends CONTENT_SPLITOR FIELD_SPLITOR), a Recall, and Order_Msg (ordinal 4).
    pub = PUB_GOLDEN[:-1] + f"{C}10.0.0.7{F}"
    cloud = f"SubAfter{C}REQ1{C}{MSG_ID}{C}3{C}true{C}null{C}0{C}{F}"
    recall = f"Recall{C}{T}{C}DefaultRegion{C}PID-test{C}topic-test{C}{MSG_ID}{C}true{F}"
    order = PUB_GOLDEN.replace(f"{C}245{C}0{C}", f"{C}245{C}4{C}")
    records = decode(pub + cloud + recall + order).records
    assert records[0] == dataclasses.replace(PUB, client_host="10.0.0.7")
    assert records[1] == SubAfterRecord("REQ1", MSG_ID, 3, True, None, 0, None, None)
    assert records[2] == RecallRecord(T, "DefaultRegion", "PID-test", "topic-test", MSG_ID, True)
    assert isinstance(records[3], PubRecord) and records[3].msg_type is MessageType.ORDER
    assert encode(records[1]) == cloud  # written back as Apache writes it


def test_old_writers_field_counts_decode() -> None:
    # 13-field Pub (no offsetMsgId, before 4.3) and 6-field SubAfter (no contextCode)
    pub13 = f"Pub{C}{T}{C}R{C}G{C}T{C}{MSG_ID}{C}null{C}null{C}h:1{C}1{C}2{C}3{C}false"
    sub6 = f"SubAfter{C}REQ{C}{MSG_ID}{C}5{C}TRUE{C}k"
    a, b = decode(pub13 + F + sub6 + F).records
    assert isinstance(a, PubRecord) and a.offset_msg_id is None and not a.success
    assert a.msg_type is MessageType.DELAY and a.tags is None
    assert b == SubAfterRecord("REQ", MSG_ID, 5, True, "k", None, None, None)


def test_unknown_types_are_skipped_and_malformed_records_counted() -> None:
    text = f"Future{C}1{C}2{F}Pub{C}not-a-time{C}x{F}SubBefore{C}1{F}" + SUB_BEFORE_GOLDEN
    decoded = decode(text)
    assert decoded.records == [SUB_BEFORE]
    assert decoded.malformed == 2
    assert decode_record(f"Future{C}x") is None
    assert decode(b"").records == []


def test_java_split_drops_trailing_empty_fields_only() -> None:
    assert java_split(f"a{C}{C}b{C}{C}", C) == ["a", "", "b"]
    assert java_split("", C) == [""]


_text = st.text(alphabet=st.characters(blacklist_characters=f"{C}{F} ",
                                       blacklist_categories=("Cs",)), min_size=1, max_size=12)
_opt_text = st.one_of(st.none(), _text.filter(lambda s: s != "null"))
_ms = st.integers(min_value=0, max_value=2**62)


@given(st.builds(PubRecord, _ms, _text, _text, _text, _text, _opt_text, _opt_text, _text,
                 st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                 st.sampled_from(MessageType), _opt_text, st.booleans()),
       st.builds(SubBeforeRecord, _ms, _opt_text, _text, _text, _text, st.integers(0, 99),
                 _opt_text),
       st.builds(SubAfterRecord, _text, _text, st.integers(0, 2**31 - 1), st.booleans(),
                 _opt_text, st.sampled_from(ConsumeReturnType), _ms, _text))
def test_records_round_trip(pub: PubRecord, before: SubBeforeRecord,
                            after: SubAfterRecord) -> None:
    text = encode(pub) + encode(before) + encode(after)
    assert decode(text.encode()).records == [pub, before, after]
