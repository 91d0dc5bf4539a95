"""Tests of the message record codec, properties codec, hashes and ids."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.protocol.message import (
    BLANK_MAGIC,
    BORNHOST_V6_FLAG,
    HEAD_V4_V4,
    MESSAGE_MAGIC,
    STOREHOST_V6_FLAG,
    BatchItem,
    RecordError,
    create_offset_msg_id,
    decode_batch_body,
    decode_offset_msg_id,
    decode_record,
    decode_records,
    encode_batch_body,
    encode_record,
    java_string_hash,
    properties_to_string,
    property_value,
    record_length,
    string_to_properties,
    tags_hash_code,
)

hosts = st.sampled_from(
    [("127.0.0.1", 10911), ("10.1.2.3", 1), ("::1", 9876), ("fe80::1:2", 65535)]
)
topics = st.text(alphabet="abcXYZ019_-%|", min_size=1, max_size=127)
prop_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    min_size=1,
    max_size=20,
)
props = st.dictionaries(prop_text, prop_text, max_size=6)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(0, 2**62)


def test_magic_codes() -> None:
    assert MESSAGE_MAGIC - 2**32 == -626843481
    assert BLANK_MAGIC - 2**32 == -875286124


def test_layout_positions_and_length() -> None:
    rec = encode_record(topic="T", body=b"abc", properties="K\x01V")
    assert len(rec) == 91 + 3 + 1 + 3 == record_length(0, 3, 1, 3)
    assert int.from_bytes(rec[0:4], "big") == len(rec)
    assert int.from_bytes(rec[4:8], "big") == MESSAGE_MAGIC
    assert int.from_bytes(rec[8:12], "big") == zlib.crc32(b"abc") & 0x7FFFFFFF
    assert HEAD_V4_V4.size == 88


@given(
    topic=topics, body=st.binary(max_size=300), properties=props, queue_id=i32, flag=i32,
    queue_offset=i64, physical_offset=i64, sysflag=st.integers(0, 0x7CF), born=hosts,
    store=hosts, born_ts=i64, store_ts=i64, reconsume=i32, prepared=i64,
)  # fmt: skip
def test_record_round_trip(
    topic: str, body: bytes, properties: dict[str, str], queue_id: int, flag: int,
    queue_offset: int, physical_offset: int, sysflag: int, born: tuple[str, int],
    store: tuple[str, int], born_ts: int, store_ts: int, reconsume: int, prepared: int,
) -> None:  # fmt: skip
    text = properties_to_string(properties)
    rec = encode_record(
        topic=topic, body=body, properties=text, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sysflag=sysflag,
        born_timestamp=born_ts, born_host=born, store_timestamp=store_ts, store_host=store,
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
    )  # fmt: skip
    d = decode_record(rec, check_crc=True)
    assert d.total_size == len(rec)
    assert (d.topic, d.body, d.queue_id, d.flag) == (topic, body, queue_id, flag)
    assert (d.queue_offset, d.physical_offset) == (queue_offset, physical_offset)
    assert (d.born_timestamp, d.store_timestamp) == (born_ts, store_ts)
    assert d.born_host == born and d.store_host == store
    assert (d.reconsume_times, d.prepared_transaction_offset) == (reconsume, prepared)
    assert d.properties() == properties
    assert bool(d.sysflag & BORNHOST_V6_FLAG) == (":" in born[0])
    assert bool(d.sysflag & STOREHOST_V6_FLAG) == (":" in store[0])
    assert d.sysflag & ~0x30 == sysflag & ~0x30


@given(props)
def test_properties_round_trip(p: dict[str, str]) -> None:
    text = properties_to_string(p)
    assert string_to_properties(text) == p
    assert string_to_properties(text + "\x02") == p  # old clients' trailing separator
    for k, v in p.items():
        assert property_value(text, k) == v


def test_properties_decoder_rules() -> None:
    assert string_to_properties("") == {}
    assert string_to_properties("\x01x\x02a\x01\x02b\x01c\x02b\x01d") == {"b": "d"}
    assert string_to_properties("k\x01v\x01w") == {"k": "v\x01w"}
    assert property_value("XTAGS\x01no\x02TAGS\x01yes", "TAGS") == "yes"
    assert property_value("A\x01b", "TAGS") is None


def test_java_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("日本") == 835047
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00  # surrogate pair: two units
    assert tags_hash_code(None) == 0 and tags_hash_code("") == 0


def test_offset_msg_id() -> None:
    mid = create_offset_msg_id(("192.168.1.10", 10911), 0x1234)
    assert mid == "C0A8010A00002A9F0000000000001234"
    assert decode_offset_msg_id(mid) == (("192.168.1.10", 10911), 0x1234)
    v6 = create_offset_msg_id(("fe80::1", 10911), 2**40)
    assert len(v6) == 56
    assert decode_offset_msg_id(v6) == (("fe80::1", 10911), 2**40)
    with pytest.raises(RecordError):
        decode_offset_msg_id("ABCD")


@given(st.lists(st.tuples(i32, st.binary(max_size=50), props), max_size=5))
def test_batch_body_round_trip(items: list[tuple[int, bytes, dict[str, str]]]) -> None:
    batch = [BatchItem(f, b, properties_to_string(p)) for f, b, p in items]
    assert decode_batch_body(encode_batch_body(batch)) == batch


def test_decode_errors() -> None:
    rec = encode_record(topic="T", body=b"abc", properties="")
    with pytest.raises(RecordError):
        decode_record(b"\x00" * 8 + rec[8:])
    with pytest.raises(RecordError):
        decode_record(rec[:-1])
    bad = bytearray(rec)
    bad[-4] ^= 0xFF  # a body byte
    with pytest.raises(RecordError):
        decode_record(bytes(bad), check_crc=True)
    assert decode_records(rec + rec)[1].body == b"abc"
    with pytest.raises(RecordError):
        decode_batch_body(b"\x00\x00\x00\x01")
