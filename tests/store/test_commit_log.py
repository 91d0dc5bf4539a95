"""Appends: record layout in the file, rolling across tiny segments, batches, limits, ids."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

from engine.protocol.message import (
    BLANK_MAGIC,
    BORNHOST_V6_FLAG,
    STOREHOST_V6_FLAG,
    BatchItem,
    BatchMessage,
    BrokerMessage,
    MessageRecord,
    decode_offset_msg_id,
    decode_record,
    decode_records,
    encode_batch_body,
    encode_record,
    properties_to_string,
)
from engine.store import MessageStore, PutMessageStatus
from tests.store.helpers import msg


def encode_record_of(r: MessageRecord) -> bytes:
    """Re-encode a decoded record (what an HA slave receives)."""
    return encode_record(
        topic=r.topic, body=r.body, properties=r.properties_raw.decode(), queue_id=r.queue_id,
        flag=r.flag, queue_offset=r.queue_offset, physical_offset=r.physical_offset,
        sysflag=r.sysflag, born_timestamp=r.born_timestamp, born_host=r.born_host,
        store_timestamp=r.store_timestamp, store_host=r.store_host,
        reconsume_times=r.reconsume_times,
        prepared_transaction_offset=r.prepared_transaction_offset,
    )  # fmt: skip


async def test_put_writes_the_exact_record(store: MessageStore) -> None:
    r = await store.put_message(msg(1))
    assert r.ok and r.wrote_offset == 0 and r.queue_offset == 0
    raw = store.look_message_by_offset(0)
    assert raw is not None and len(raw) == r.wrote_bytes
    rec = decode_record(raw, check_crc=True)
    assert rec.topic == "TopicTest" and rec.physical_offset == 0 and rec.queue_offset == 0
    assert rec.store_host == store.store_host and rec.born_host == ("10.0.0.2", 5000)
    assert rec.store_timestamp == r.store_timestamp and rec.properties()["TAGS"] == "TagA"
    assert decode_offset_msg_id(r.msg_id) == (store.store_host, 0)
    assert rec.offset_msg_id == r.msg_id


async def test_rolls_across_segments_with_blank_records(store: MessageStore) -> None:
    offsets = []
    for i in range(200):
        r = await store.put_message(msg(i, queue_id=i % 3, size=50 + (i * 37) % 400))
        assert r.ok
        offsets.append((r.wrote_offset, r.wrote_bytes))
    files = store.commit_log.mfq.files
    assert len(files) > 10
    for (o, n), (o2, _) in itertools.pairwise(offsets):
        assert o // 4096 == (o + n - 1) // 4096  # never spans two segments
        assert o2 == o + n or o2 % 4096 == 0
    for mf in files[:-1]:
        pos = mf.wrote_position
        assert pos == 4096
    # each full segment ends with a blank record: find it by walking the records
    mf = files[0]
    pos = 0
    while True:
        size = int.from_bytes(mf.read(pos, 4), "big")
        magic = int.from_bytes(mf.read(pos + 4, 4), "big")
        if magic == BLANK_MAGIC:
            assert size == 4096 - pos
            break
        pos += size
    for q in range(3):
        assert store.get_max_offset_in_queue("TopicTest", q) == len(range(q, 200, 3))
    names = sorted(os.listdir(store.config.commit_log_dir))
    assert names[:2] == ["00000000000000000000", "00000000000000004096"]


async def test_batch_put_is_one_pass_with_consecutive_offsets(store: MessageStore) -> None:
    await store.put_message(msg(0))
    items = [
        BatchItem(i, f"body{i}".encode(), properties_to_string({"UNIQ_KEY": f"B{i}"}))
        for i in range(5)
    ]
    batch = BatchMessage(
        "TopicTest", encode_batch_body(items), properties=properties_to_string({"WAIT": "true"})
    )
    r = await store.put_messages(batch)
    assert r.ok and r.msg_num == 5 and r.queue_offset == 1
    ids = r.msg_id.split(",")
    assert len(ids) == 5
    got = store.get_message("g", "TopicTest", 1, 0, 32)
    assert got.status.name == "NO_MATCHED_LOGIC_QUEUE"
    got = store.get_message("g", "TopicTest", 0, 1, 32)
    recs = [decode_record(m) for m in got.messages]
    assert [x.queue_offset for x in recs] == [1, 2, 3, 4, 5]
    assert [x.flag for x in recs] == [0, 1, 2, 3, 4]
    assert recs[2].properties() == {"UNIQ_KEY": "B2", "WAIT": "true"}
    assert [x.offset_msg_id for x in recs] == ids


async def test_limits_are_clear_errors(make_store: Callable[..., MessageStore]) -> None:
    s = make_store(max_message_size=1000)
    await s.start()
    try:
        r = await s.put_message(BrokerMessage("T", b"x" * 1001))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.error_message
        r = await s.put_message(BrokerMessage("T", b"", properties="K\x01" + "v" * 40000))
        assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        r = await s.put_message(BrokerMessage("T" * 128, b""))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert s.get_max_phy_offset() == 0
        # Apache limits the body, not the record: a body of exactly maxMessageSize is stored
        # with its properties (the record may be 64 KiB more).
        r = await s.put_message(BrokerMessage("T", b"x" * 1000, properties="K\x01" + "v" * 1500))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        await s.shutdown()


async def test_a_record_larger_than_a_segment_is_refused(
        make_store: Callable[..., MessageStore]) -> None:
    s = make_store(max_message_size=64 * 1024)  # more than the 4 KiB segments hold
    await s.start()
    try:
        r = await s.put_message(BrokerMessage("T", b"x" * 5000))
        assert r.status is PutMessageStatus.UNKNOWN_ERROR and "segment" in r.error_message
        assert s.get_max_phy_offset() == 0
        r = await s.put_message(BrokerMessage("T", b"x" * 100))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        await s.shutdown()


async def test_ipv6_hosts_set_sysflag_bits(store: MessageStore) -> None:
    m = BrokerMessage("T", b"v6", born_host=("::1", 7), store_host=("fe80::2", 10911))
    r = await store.put_message(m)
    rec = decode_record(store.look_message_by_offset(r.wrote_offset) or b"", check_crc=True)
    assert rec.sysflag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) == 0x30
    assert rec.born_host == ("::1", 7) and rec.store_host == ("fe80::2", 10911)
    assert len(r.msg_id) == 56
    assert r.wrote_bytes == 91 + 2 + 1 + 24


async def test_prepared_messages_are_not_dispatched(store: MessageStore) -> None:
    r = await store.put_message(BrokerMessage("T", b"half", sysflag=0x4))
    assert r.ok and r.queue_offset == 0
    assert store.get_max_offset_in_queue("T", 0) == 0
    r = await store.put_message(BrokerMessage("T", b"commit", sysflag=0x8))
    assert store.get_max_offset_in_queue("T", 0) == 1


async def test_large_records_take_the_pwritev_path(make_store: Callable[..., MessageStore]) -> None:
    s = make_store(mapped_file_size_commit_log=256 * 1024)
    await s.start()
    bodies = [os.urandom(20_000 + i) for i in range(30)]
    for i, b in enumerate(bodies):
        r = await s.put_message(BrokerMessage("Big", b, properties=f"UNIQ_KEY\x01BIG{i}"))
        assert r.ok
    await s.shutdown()
    s = make_store(mapped_file_size_commit_log=256 * 1024)
    assert s.recovery_report is not None and s.recovery_report.process_offset > 0
    got = s.get_message("g", "Big", 0, 0, 64)
    recs = [decode_record(m, check_crc=True) for m in got.messages]
    assert [r.body for r in recs] == bodies[: len(recs)] and len(recs) >= 3
    q = s.query_message("Big", "BIG29", 4, 0, 2**62)
    assert decode_record(q.messages[0]).body == bodies[29]
    s.close()


async def test_raw_append_is_dispatched_by_reput(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    master = make_store(tmp_path / "m")
    for i in range(30):
        master.append_message(msg(i, queue_id=i % 2))
    first = master.commit_log.mfq.files[0]
    data = first.read(0, first.wrote_position)
    slave = make_store(tmp_path / "s")
    records = decode_records(data[: data.find((0xCBD43194).to_bytes(4, "big")) - 4])
    assert slave.append_raw(b"".join(encode_record_of(r) for r in records)) == len(records)
    assert slave.get_max_offset_in_queue("TopicTest", 1) == sum(r.queue_id == 1 for r in records)
    got = slave.get_message("g", "TopicTest", 1, 0, 4)
    assert [decode_record(m).queue_offset for m in got.messages] == [0, 1, 2, 3]
    assert len(slave.query_message("TopicTest", "key3", 4, 0, 2**62).messages) == 1
    master.close()
    slave.close()
