"""The append fast paths agree with the codec: batch parsing, properties, key hashes, warming."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.protocol.message import (
    BatchItem,
    BatchMessage,
    BrokerMessage,
    RecordError,
    decode_record,
    encode_batch_body,
    encode_record,
    iter_batch_items,
    property_value,
)
from engine.store import GetMessageStatus, MessageStore, PutMessageStatus
from engine.store.commit_log import BatchRequests, _dispatch_values
from engine.store.index_file import key_hash
from engine.store.index_service import IndexService
from engine.store.mapped_file import WARM_CHUNK, MappedFile
from engine.store.mapped_file_queue import Preallocator
from engine.store.results import DispatchRequest
from tests.conftest import FIXTURE_HEALTH_CHECKS
from tests.store.helpers import Clock

NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "TAGSX", "KEY", "A", ""]
VALUES = st.text(alphabet="ab \x01é", max_size=5)


@st.composite
def raw_properties(draw: st.DrawFn) -> str:
    """Properties strings, well-formed or not: duplicates, empty values, suffix matches."""
    pairs = draw(st.lists(st.tuples(st.sampled_from(NAMES), VALUES), max_size=6))
    text = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    if draw(st.booleans()):
        text += draw(st.sampled_from(["\x02", "\x01", "TAGS\x01", "\x02KEYS", "x"]))
    return text


@given(raw_properties() | st.text(alphabet="TAGSKEYUNIQ_\x01\x02a", max_size=30))
def test_dispatch_values_are_property_values(text: str) -> None:
    expected = (
        property_value(text, "TAGS"),
        property_value(text, "KEYS") or "",
        property_value(text, "UNIQ_KEY"),
    )
    assert _dispatch_values(text) == expected


HEX = "0123456789ABCDEF"
UNIQ = st.text(alphabet=HEX, min_size=32, max_size=32) | st.text(min_size=30, max_size=34)


@given(st.text(max_size=12), UNIQ)
def test_uniq_key_hash_is_the_key_hash(topic: str, uniq: str) -> None:
    svc = IndexService("unused", 97, 100, Clock())
    prefix = topic + "#"
    for _ in range(2):  # computed, then from the caches
        assert svc._uniq_hash(prefix, uniq) == key_hash(prefix + uniq)


def _record_at(s: MessageStore, offset: int) -> bytes:
    raw = s.look_message_by_offset(offset)
    assert raw is not None
    return raw


ITEMS = st.lists(
    st.tuples(
        st.integers(0, 7),
        st.binary(max_size=300),
        st.sampled_from(
            [
                "",
                "TAGS\x01TagA",
                "UNIQ_KEY\x01" + "0A" * 16 + "\x02KEYS\x01k1 k2",
                "KEYS\x01k3\x02TAGS\x01é\x02",
                "A\x01b",
            ]
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40, suppress_health_check=FIXTURE_HEALTH_CHECKS
)
@given(ITEMS, st.sampled_from(["", "WAIT\x01true", "TAGS\x01BT\x02KEYS\x01bk"]))
def test_batch_records_are_the_codec_records(
    make_store: Callable[..., MessageStore],
    tmp_path_factory: pytest.TempPathFactory,
    items: list[tuple[int, bytes, str]],
    batch_props: str,
) -> None:
    clock = Clock()
    root = tmp_path_factory.mktemp("b")
    s = make_store(root, clock=clock, mapped_file_size_commit_log=64 * 1024)
    try:
        s.append_message(BrokerMessage("T", b"first"))
        body = encode_batch_body(BatchItem(f, b, p) for f, b, p in items)
        batch = BatchMessage(
            "T", body, properties=batch_props, born_timestamp=7, born_host=("10.0.0.9", 99)
        )
        r = s.append_messages(batch)
        assert r.ok and r.msg_num == len(items) and r.queue_offset == 1
        offset = r.wrote_offset
        for i, ((flag, b, p), msg_id) in enumerate(zip(items, r.msg_id.split(","), strict=True)):
            if p and batch_props:  # the batch's properties are appended to each message's
                p = p + ("" if p.endswith("\x02") else "\x02") + batch_props
            elif batch_props:
                p = batch_props
            expected = encode_record(
                topic="T", body=b, properties=p, queue_id=0, flag=flag,
                queue_offset=1 + i, physical_offset=offset, born_timestamp=7,
                born_host=("10.0.0.9", 99), store_timestamp=clock.now, store_host=s.store_host,
            )  # fmt: skip
            assert _record_at(s, offset) == expected
            assert decode_record(expected).offset_msg_id == msg_id
            offset += len(expected)
        assert offset == r.wrote_offset + r.wrote_bytes
        got = s.get_message("g", "T", 0, 1, 32)
        assert [decode_record(m).flag for m in got.messages] == [f for f, _, _ in items]
        keys = [k for _, _, p in items for k in (property_value(p, "KEYS") or "").split()]
        for k in set(keys) if "KEYS" not in batch_props else {"bk"}:
            assert s.query_message("T", k, 32, 0, 2**62).messages
    finally:
        s.close()


def _batch_error(body: bytes) -> str:
    try:
        items = iter_batch_items(body)
    except RecordError as e:
        return str(e)
    return "" if items else "empty batch"


def test_malformed_batches_report_the_codec_error(make_store: Callable[..., MessageStore]) -> None:
    s = make_store(max_message_size=3000)
    first = encode_batch_body([BatchItem(1, b"abc", "TAGS\x01x")])
    good = first + encode_batch_body([BatchItem(2, b"defgh", "KEYS\x01k")])
    cut = [good[:n] for n in range(len(good)) if n != len(first)]  # a shorter valid batch
    changed = [
        good[:3] + b"\x7f" + good[4:],  # item size
        good[:19] + b"\x7f" + good[20:],  # body length
        good + b"\x00\x00\x00",  # trailing bytes
    ]
    for body in cut + changed:
        error = _batch_error(body)
        assert error
        r = s.append_messages(BatchMessage("T", body))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and r.error_message == error
    too_big = encode_batch_body([BatchItem(0, b"x" * 5000, "")])
    r = s.append_messages(BatchMessage("T", too_big + good[:10]))
    assert r.error_message == _batch_error(too_big + good[:10])  # malformed wins
    r = s.append_messages(BatchMessage("T" * 130, good[:10]))
    assert r.error_message == _batch_error(good[:10])
    r = s.append_messages(BatchMessage("T", too_big))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.error_message
    r = s.append_messages(BatchMessage("T", good, properties="P\x01" + "v" * 40000))
    assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    not_utf8 = encode_batch_body([BatchItem(0, b"", "é")])[:-2] + b"\xff\xfe"
    r = s.append_messages(BatchMessage("T", not_utf8))  # refused, not a UnicodeDecodeError
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert r.error_message == "batch item 0: properties are not UTF-8"
    assert s.get_max_phy_offset() == 0
    s.close()


async def test_large_records_with_warming_round_trip_and_recover(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    seg = 4 * WARM_CHUNK
    root = tmp_path / "w"
    s = make_store(root, mapped_file_size_commit_log=seg, warm_mapped_file_enable=True)
    await s.start()
    bodies = [os.urandom(1000 + (i * 7919) % 70_000) for i in range(300)]
    for i, b in enumerate(bodies):
        r = await s.put_message(BrokerMessage("Big", b, properties=f"UNIQ_KEY\x01BIG{i:029d}"))
        assert r.ok
    assert len(s.commit_log.mfq.files) > 2
    shutil.copytree(root, tmp_path / "crash")  # a crash image: abort marker and all
    await s.shutdown()
    for where, clean in ((root, True), (tmp_path / "crash", False)):
        s = make_store(where, mapped_file_size_commit_log=seg, warm_mapped_file_enable=True)
        assert s.last_exit_ok is clean
        got, offset = [], 0
        while (r := s.get_message("g", "Big", 0, offset, 32)).status is GetMessageStatus.FOUND:
            got += [decode_record(m, check_crc=True).body for m in r.messages]
            offset = r.next_begin_offset
        assert got == bodies
        q = s.query_message("Big", f"BIG{299:029d}", 4, 0, 2**62)
        assert decode_record(q.messages[0]).body == bodies[299]
        s.close()


def test_warming_stays_ahead_of_the_writer(tmp_path: Path) -> None:
    size = 8 * WARM_CHUNK
    mf = MappedFile(str(tmp_path / f"{0:020d}"), size)
    mf.allocate()
    assert mf.warm(3 * WARM_CHUNK) and mf.warmed == (0, 3 * WARM_CHUNK)
    mf.mm[0:5] = b"hello"
    mf.wrote_position = 2 * WARM_CHUNK + 5
    assert mf.warm(3 * WARM_CHUNK) and mf.warmed == (0, 6 * WARM_CHUNK)
    assert mf.warm(3 * WARM_CHUNK) and mf.warmed == (0, 6 * WARM_CHUNK)  # far enough ahead
    mf.wrote_position = 6 * WARM_CHUNK + 1  # the writer overtook the warming: give up
    assert not mf.warm(3 * WARM_CHUNK)
    assert mf.read(0, 5) == b"hello"  # warming changes no content
    mf.destroy(0, 0)

    mf = MappedFile(str(tmp_path / f"{size:020d}"), size)
    mf.wrote_position = WARM_CHUNK // 2  # in use before the first pass: start ahead
    assert mf.warm(2 * WARM_CHUNK) and mf.warmed == (2 * WARM_CHUNK, 3 * WARM_CHUNK)
    mf.direct_bytes = WARM_CHUNK // 4  # a quarter written with pwritev: still warmed
    assert mf.warm(3 * WARM_CHUNK) and mf.warmed == (2 * WARM_CHUNK, 4 * WARM_CHUNK)
    mf.direct_bytes = WARM_CHUNK // 3 * 2  # mostly pwritev appends: no more warming
    assert not mf.warm(3 * WARM_CHUNK)
    mf.destroy(0, 0)
    assert not mf.warm(2 * WARM_CHUNK)  # closed

    mf = MappedFile(str(tmp_path / f"{2 * size:020d}"), size)
    assert not mf.warm(10 * size) and mf.warmed == (0, size)  # warm to the end: done
    mf.destroy(0, 0)


def test_preallocator_warms_off_the_hot_path(tmp_path: Path) -> None:
    p = Preallocator()
    path = str(tmp_path / f"{0:020d}")
    p.request(path, 4 * WARM_CHUNK, warm=True)
    mf = p.take(path)
    assert mf is not None and not mf.closed
    deadline = time.monotonic() + 10
    while mf.warmed[1] < mf.file_size and time.monotonic() < deadline:
        time.sleep(0.01)  # the first pass warms the prepared segment after take() returned
    assert mf.warmed == (0, mf.file_size)
    mf.wrote_position = 1
    p.warm_later(mf)
    p.request(str(tmp_path / f"{4 * WARM_CHUNK:020d}"), 4 * WARM_CHUNK, warm=True)
    p.shutdown()  # stops the warming passes and deletes the unused segment
    assert os.listdir(tmp_path) == [os.path.basename(path)]
    p.warm_later(mf)  # after shutdown: ignored
    mf.destroy(0, 0)


def test_batch_requests_are_the_dispatch_requests() -> None:
    reqs = BatchRequests(
        "T", 3, 0x8, 1000, 40, 1, (100, 250, 330), (150, 80, 90), (7, 8, 9), ("k", "", "a b"),
        ("u1", None, "u3"),
    )  # fmt: skip
    expected = [
        DispatchRequest("T", 3, 100, 150, 7, 1000, 40, "k", "u1", 0x8, 0),
        DispatchRequest("T", 3, 250, 80, 8, 1000, 41, "", None, 0x8, 0),
        DispatchRequest("T", 3, 330, 90, 9, 1000, 42, "a b", "u3", 0x8, 0),
    ]
    assert len(reqs) == 3 and list(reqs) == expected
    assert reqs[-1] == expected[-1] and reqs[1:] == expected[1:] and reqs[::-2] == expected[::-2]
    with pytest.raises(IndexError):
        reqs[3]
    with pytest.raises(IndexError):
        reqs[-4]
    prepared = BatchRequests("T", 0, 0x4, 5, 0, 0, (1, 2), (1, 1), (0, 0), ("", ""), (None, None))
    assert [r.consume_queue_offset for r in prepared] == [0, 0]  # no queue offsets taken


MANY = st.lists(
    st.tuples(
        st.sampled_from(["T", "U", "T" * 130]),  # the last one is too long: refused alone
        st.integers(0, 2),
        st.binary(max_size=700),
        st.sampled_from(["", "TAGS\x01a\x02KEYS\x01k1 k2", "DELAY\x012\x02UNIQ_KEY\x01" + "0B" * 16,
                         "P\x01" + "v" * 33000]),  # the last one: properties too long
        st.sampled_from([0, 4, 8, 12]),  # transaction types: prepared and rollback not queued
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=30, suppress_health_check=FIXTURE_HEALTH_CHECKS
)
@given(MANY)
def test_append_many_is_append_message_one_by_one(
    make_store: Callable[..., MessageStore],
    tmp_path_factory: pytest.TempPathFactory,
    items: list[tuple[str, int, bytes, str, int]],
) -> None:
    """Same records byte for byte, same results, same queue entries and index, across
    segment rolls (4 KiB segments) and index-file rolls (7 entries), with refused messages
    among the others."""
    clock = Clock()
    stores = [make_store(tmp_path_factory.mktemp("m"), clock=clock, max_message_size=40000,
                         max_index_num=7) for _ in range(2)]
    try:
        msgs = [BrokerMessage(t, b, queue_id=q, properties=p, sysflag=f, born_timestamp=5,
                              born_host=("10.0.0.3", 77), reconsume_times=q)
                for t, q, b, p, f in items]
        one = [stores[0].append_message(m) for m in msgs]
        many = stores[1].append_many(msgs)
        assert many == one
        end = stores[0].get_max_phy_offset()
        assert stores[1].get_max_phy_offset() == end
        assert stores[0].commit_log.get_data(0, end) == stores[1].commit_log.get_data(0, end)
        for topic in ("T", "U", "SCHEDULE_TOPIC_XXXX"):
            for q in range(3):
                a, b = (s.get_message("g", topic, q, 0, 64) for s in stores)
                assert (a.status, a.messages, a.next_begin_offset) == (
                    b.status, b.messages, b.next_begin_offset)
        for key in ("k1", "k2", "0B" * 16):
            a, b = (s.query_message("T", key, 64, 0, 2**62) for s in stores)
            assert a.messages == b.messages
        assert stores[0].dispatcher.reput_from_offset == stores[1].dispatcher.reput_from_offset
    finally:
        for s in stores:
            s.close()
