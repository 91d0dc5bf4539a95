"""The native extension's fast paths give what the pure-Python reference gives, input for
input: commands (or the same FrameError) from any byte stream, send headers (or the same
HeaderError) from any extFields, and the same property values.  Run with the extension
loaded, the reference being the same functions with it unloaded."""

from __future__ import annotations

import dataclasses
import json
import os
import random
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.broker.handlers.send import _strip_wait
from engine.protocol import native
from engine.protocol.codes import SerializeType
from engine.protocol.command import FRAME_PREFIX, RemotingCommand, encode
from engine.protocol.errors import FrameError, HeaderError
from engine.protocol.frame import FrameDecoder
from engine.protocol.header.broker import decode_send_header_v2
from engine.protocol.message import BrokerMessage, java_string_hash
from engine.store.commit_log import CommitLog, _dispatch_values
from engine.store.index_file import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, key_hashes, put_entries
from tests.conftest import FIXTURE_HEALTH_CHECKS

T = TypeVar("T")


@pytest.fixture(autouse=True)
def codec_path() -> None:  # overrides the conftest's: each test here compares both paths
    if not native.load():
        pytest.skip("the native extension is not built (or MQ_PURE_PYTHON is set)")


def both(fn: Callable[[], T]) -> tuple[Any, Any]:
    """`fn()` with the native fast paths and without: each result, or the exception's
    type and text."""
    out: list[Any] = []
    for use in (True, False):
        native.load() if use else native.unload()
        try:
            out.append(fn())
        except (FrameError, HeaderError) as exc:
            out.append((type(exc), str(exc)))
        finally:
            native.load()
    return out[0], out[1]


def test_the_extension_is_built_by_the_install() -> None:
    assert os.environ.get("MQ_PURE_PYTHON", "") in ("", "0")
    assert native.split_frames is not None and native.send_header_v2 is not None
    assert native.key_hashes is not None


# ------------------------------------------------------------------------------ frames

json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=6)
int_field = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**64), 2**64),
                      json_value)
ext_fields = st.one_of(
    st.dictionaries(st.text(max_size=6), st.text(max_size=12), max_size=6),
    st.dictionaries(st.text(max_size=6), json_value, max_size=4),
    json_value)
header_doc = st.fixed_dictionaries({}, optional={
    "code": int_field, "opaque": int_field, "flag": int_field, "version": int_field,
    "language": st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "NOPE", "3", ""]) | json_value,
    "remark": st.none() | st.text(max_size=10) | json_value,
    "extFields": ext_fields, "serializeTypeCurrentRPC": st.just("JSON"),
})


def frame_of(doc: Any, body: bytes, serialize: int = 0) -> bytes:
    header = json.dumps(doc).encode()
    return FRAME_PREFIX.pack(4 + len(header) + len(body),
                             serialize << 24 | len(header)) + header + body


def decode_all(data: bytes, chunk: int) -> list[RemotingCommand]:
    decoder = FrameDecoder(max_frame=1 << 20, max_header=4096)
    out: list[RemotingCommand] = []
    for i in range(0, len(data), chunk):
        out += decoder.feed(data[i:i + chunk])
    return out


@given(st.lists(st.tuples(header_doc, st.binary(max_size=40)), min_size=1, max_size=5),
       st.integers(1, 400))
def test_frames_decode_the_same(frames: list[tuple[Any, bytes]], chunk: int) -> None:
    data = b"".join(frame_of(doc, body) for doc, body in frames)
    fast, pure = both(lambda: decode_all(data, chunk))
    assert fast == pure


@given(st.binary(max_size=300), st.integers(0, 2))
def test_garbage_is_refused_the_same(data: bytes, prefix: int) -> None:
    head = [b"", FRAME_PREFIX.pack(len(data) + 4, len(data)), FRAME_PREFIX.pack(8, 4)][prefix]
    fast, pure = both(lambda: decode_all(head + data, 64))
    assert fast == pure


@pytest.mark.parametrize("seed", range(20))
def test_mutated_frames_decode_the_same(seed: int) -> None:
    rnd = random.Random(seed)
    cmd = RemotingCommand(code=310, opaque=5, ext_fields={"a": "g", "b": "T", "d": "4"},
                          body=b"x" * 30)
    good = encode(cmd)
    for _ in range(200):
        data = bytearray(good * 3)
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        fast, pure = both(lambda data=bytes(data): decode_all(data, 50))
        assert fast == pure


def test_a_frame_limit_or_header_limit_is_refused_the_same() -> None:
    big = frame_of({"code": 1, "extFields": {"k": "v" * 5000}}, b"")
    for data in (big, frame_of({"code": 1}, b"x" * (2 << 20))):
        fast, pure = both(lambda data=data: decode_all(data, 1 << 16))
        assert fast == pure
        assert (isinstance(fast, tuple) and fast[0] is FrameError) or issubclass(fast[0],
                                                                                FrameError)


binary_command = st.builds(
    RemotingCommand, code=st.integers(-(2**15), 2**15 - 1), opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1), language=st.integers(0, 127),
    version=st.integers(-(2**15), 2**15 - 1), remark=st.none() | st.text(max_size=10),
    ext_fields=st.none() | st.dictionaries(st.text(max_size=6), st.text(max_size=12), max_size=6),
    body=st.none() | st.binary(min_size=1, max_size=40),
    serialize_type=st.just(SerializeType.ROCKETMQ))


@given(st.lists(binary_command | st.tuples(header_doc, st.binary(max_size=40)), min_size=1,
                max_size=5), st.integers(1, 400))
def test_binary_and_json_frames_decode_the_same(frames: list[Any], chunk: int) -> None:
    data = b"".join(encode(f) if isinstance(f, RemotingCommand) else frame_of(*f) for f in frames)
    fast, pure = both(lambda: decode_all(data, chunk))
    assert fast == pure


@pytest.mark.parametrize("seed", range(20))
def test_mutated_binary_frames_decode_the_same(seed: int) -> None:
    rnd = random.Random(seed)
    cmd = RemotingCommand(code=310, opaque=5, remark="é", ext_fields={"a": "g", "b": "T", "d": ""},
                          body=b"x" * 30, serialize_type=SerializeType.ROCKETMQ)
    good = encode(cmd)
    for _ in range(200):
        data = bytearray(good * 3)
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        fast, pure = both(lambda data=bytes(data): decode_all(data, 50))
        assert fast == pure


def test_binary_headers_decode_natively_and_other_inputs_are_left_to_python() -> None:
    cmd = RemotingCommand(code=11, opaque=3, remark="r", ext_fields={"a": "b"}, body=b"q")
    rocketmq = encode(dataclasses.replace(cmd, serialize_type=SerializeType.ROCKETMQ))
    assert native.split_frames is not None
    decoded: list[RemotingCommand] = []
    assert native.split_frames(rocketmq, 0, 1 << 20, 4096, decoded) == len(rocketmq)
    for data in (rocketmq, bytearray(encode(cmd)), memoryview(encode(cmd))):
        fast, pure = both(lambda data=data: FrameDecoder().feed(data))  # type: ignore[arg-type]
        assert fast == pure == [dataclasses.replace(cmd, serialize_type=fast[0].serialize_type)]


# ------------------------------------------------------------------------- send headers

number = st.one_of(st.integers(-(2**64), 2**64).map(str), st.sampled_from(
    ["", " 1", "+1", "1_0", "007", "-0", "x", "1.0", "٣", "9223372036854775807",
     "9223372036854775808", "-2147483649", "2147483647", "99999999999999999999"]))
flag_text = st.sampled_from(["true", "false", "TRUE", " true", "yes", "", "False"])
send_ext = st.fixed_dictionaries(
    {"a": st.text(max_size=5), "b": st.text(max_size=5), "c": st.just("TBW102"),
     "d": number, "e": number, "f": number, "g": number, "h": number},
    optional={"i": st.text(max_size=10), "j": number, "k": flag_text, "l": number,
              "m": flag_text, "n": st.sampled_from(["", "broker-a"]),
              "bname": st.sampled_from(["", "broker-b"])})


@given(send_ext, st.sets(st.sampled_from("abcdefgh"), max_size=2))
def test_send_headers_decode_the_same(ext: dict[str, str], missing: set[str]) -> None:
    for key in missing:
        ext.pop(key, None)
    fast, pure = both(lambda: decode_send_header_v2(ext))
    assert fast == pure
    assert type(fast) is type(pure)


# ---------------------------------------------------------------------------- properties

property_text = st.lists(st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "\x01", "\x02", "true", "FALSE", "false", " ", "é",
     "中", "k1 k2", "", "\U0001f600", "\x1c"]), max_size=12).map("".join)


@given(property_text)
def test_property_scans_are_the_same(props: str) -> None:
    fast_values = native.dispatch_values
    assert fast_values is not None and fast_values(props) == _dispatch_values(props)
    fast, pure = both(lambda: _strip_wait(props))
    assert fast == pure


@pytest.mark.parametrize("props", [
    "WAIT\x01true", "WAIT\x01false", "a\x01b\x02WAIT\x01False\x02c\x01d", "WAIT\x01 true ",
    "WAIT\x01", "x\x02WAIT\x01no", "TAGS\x01t\x02WAIT\x01true\x02WAIT\x01false"])
def test_wait_values(props: str) -> None:
    fast, pure = both(lambda: _strip_wait(props))
    assert fast == pure


# ------------------------------------------------------------------------- index key hashes

key_text = st.lists(st.sampled_from(
    ["a", "K", " ", "  ", "7F0000010F2C18B4AAC2", "é", "中", "\U0001f600", "\x00", "\uffff",
     "\U0010ffff", "#", "\ud800", "\udfff"]), max_size=16).map("".join)


@given(st.sampled_from(["T#", "", "中文#", "\U0001f600#", "%RETRY%g#", "\udc80#"]), key_text)
def test_key_hashes_are_the_same(prefix: str, keys: str) -> None:
    fast = native.key_hashes
    assert fast is not None
    hashes = fast(prefix, keys)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in prefix + keys):
        assert hashes is None  # a lone surrogate: left to Python
    else:
        assert hashes == key_hashes(prefix, keys)


def test_key_hashes_of_java_values() -> None:
    """String.hashCode values from Java, as abs() the index takes (0 for MIN_VALUE)."""
    fast = native.key_hashes
    assert fast is not None
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; "Aa" and "BB" collide (2112)
    assert fast("", "polygenelubricants Aa BB") == [0, 2112, 2112]
    assert fast("T#", "x") == key_hashes("T#", "x") == [abs((ord("T") * 31 + ord("#")) * 31
                                                               + ord("x"))]
    assert fast("", "\U0001f600") == [0xD83D * 31 + 0xDE00]  # its two UTF-16 units


index_entry = st.tuples(st.integers(0, 2**31 - 1) | st.sampled_from([0, 7, 14, 2**31 - 1]),
                        st.integers(-(2**63), 2**63 - 1) | st.integers(0, 1 << 40),
                        st.sampled_from([-1, 0, 999, 1_700_000_000_000, 1_700_000_999_999,
                                         2**62]) | st.integers(-(2**40), 2**45))


@given(st.integers(1, 9), st.integers(1, 5),
       st.sampled_from([0, 1, 1_700_000_000_000, 2**62]),
       st.lists(index_entry, max_size=24), st.binary(min_size=36, max_size=36))
def test_index_entries_are_written_the_same(slots: int, count: int, begin: int,
                                            entries: list[tuple[int, int, int]],
                                            old_slots: bytes) -> None:
    """The same entries and slot heads from any slot table (stale heads included)."""
    entries_at = INDEX_HEADER_SIZE + slots * 4
    size = entries_at + (count + len(entries)) * INDEX_ENTRY_SIZE
    fast_buf, pure_buf = bytearray(size), bytearray(size)
    for buf in (fast_buf, pure_buf):
        buf[INDEX_HEADER_SIZE:entries_at] = old_slots[: slots * 4]
    put = native.index_put
    assert put is not None
    fast = put(fast_buf, entries_at, slots, count, begin, entries)
    assert fast == put_entries(pure_buf, entries_at, slots, count, begin, entries)
    assert fast_buf == pure_buf


def test_index_entries_left_to_python() -> None:
    """None, nothing written: an entry past the buffer, a negative or too large hash, a
    value that is not an int, an entry that is not a 3-tuple."""
    put = native.index_put
    assert put is not None
    buf = bytearray(INDEX_HEADER_SIZE + 4 + 3 * INDEX_ENTRY_SIZE)
    for entries in ([(1, 2, 3)] * 3, [(-1, 0, 0)], [(2**31, 0, 0)], [(1, 2**63, 0)],
                    [(1, 2.0, 0)], [(1, 2)], [[1, 2, 3]]):
        assert put(buf, INDEX_HEADER_SIZE + 4, 1, 1, 0, entries) is None
        assert not any(buf)
    assert put(buf, INDEX_HEADER_SIZE + 4, 1, 1, 0, [(1, 2, 3)] * 2) == 1


# ----------------------------------------------------------------------- commit-log records

message_st = st.builds(
    BrokerMessage,
    topic=st.sampled_from(["T", "orders", "%RETRY%g", "t" * 127, "TT" * 70, "中文"]),
    body=st.binary(max_size=3000),
    queue_id=st.integers(0, 7), flag=st.integers(-(2**31), 2**31 - 1),
    properties=property_text | st.text(max_size=40),
    sysflag=st.sampled_from([0, 1, 4, 8, 12, 0x30]),
    born_timestamp=st.integers(0, 2**62),
    born_host=st.sampled_from([("10.0.0.7", 51234), ("::1", 9), ("fe80::1", 2**31 - 1)]),
    store_host=st.sampled_from([None, ("192.168.1.2", 10911), ("2001:db8::2", 10911)]),
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 2**40))


@settings(max_examples=60,
          suppress_health_check=FIXTURE_HEALTH_CHECKS)
@given(st.lists(message_st, min_size=1, max_size=12))
def test_records_are_written_the_same(tmp_path_factory: pytest.TempPathFactory,
                                      msgs: list[BrokerMessage]) -> None:
    segments, results = [], []
    for use in (True, False):
        native.load() if use else native.unload()
        root = tmp_path_factory.mktemp("native" if use else "pure")
        log = CommitLog(str(root), 64 * 1024, store_host=("127.0.0.1", 10911),
                        max_message_size=4 * 1024 * 1024, clock=lambda: 1_700_000_000_000)
        try:
            results.append(log.put_many(msgs))
            segments.append([(root / name).read_bytes() for name in sorted(os.listdir(root))])
        finally:
            log.mfq.close()
            native.load()
    assert results[0] == results[1]
    assert segments[0] == segments[1]


# ------------------------------------------------------------------------- string hash

@given(st.text(max_size=60) | st.sampled_from(["", "UNIQ_KEY", "\U0001F600x", "é中", "\uffff"]))
def test_java_string_hashes_are_the_same(text: str) -> None:
    fast, pure = both(lambda: java_string_hash(text))
    assert fast == pure


def test_a_lone_surrogate_is_left_to_python() -> None:
    assert native.string_hash is not None
    assert native.string_hash("a\ud800") is None
