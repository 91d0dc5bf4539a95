"""Reads: pull statuses, limits, tag filter, time search, key queries, arrival waiters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine.protocol.message import (
    BatchItem,
    BatchMessage,
    BrokerMessage,
    decode_record,
    encode_batch_body,
    properties_to_string,
)
from engine.store import GetMessageStatus, MessageStore
from engine.store.message_filter import TagsFilter
from tests.store.helpers import Clock, msg

S = GetMessageStatus


async def test_pull_statuses(store: MessageStore) -> None:
    assert store.get_message("g", "T", 0, 0, 32).status is S.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        await store.put_message(msg(i))
    r = store.get_message("g", "TopicTest", 0, 0, 32)
    assert r.status is S.FOUND and r.message_count == 5 and r.next_begin_offset == 5
    assert (r.min_offset, r.max_offset) == (0, 5)
    assert r.queue_offsets == [0, 1, 2, 3, 4]
    assert r.body == b"".join(r.messages)
    r = store.get_message("g", "TopicTest", 0, 5, 32)
    assert r.status is S.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 5
    r = store.get_message("g", "TopicTest", 0, 9, 32)
    assert r.status is S.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 0
    r = store.get_message("g", "TopicTest", 0, 2, 2)
    assert r.message_count == 2 and r.next_begin_offset == 4
    assert not r.suggest_pulling_from_slave


async def test_tag_filter_and_no_matched(store: MessageStore) -> None:
    for i in range(6):
        await store.put_message(msg(i, tags="TagA" if i % 2 else "TagB"))
    f = TagsFilter.from_expression("TagA || TagC")
    r = store.get_message("g", "TopicTest", 0, 0, 32, f)
    assert [decode_record(m).properties()["TAGS"] for m in r.messages] == ["TagA"] * 3
    assert r.queue_offsets == [1, 3, 5] and r.next_begin_offset == 6
    r = store.get_message("g", "TopicTest", 0, 0, 32, TagsFilter.from_expression("Nope"))
    assert r.status is S.NO_MATCHED_MESSAGE and r.next_begin_offset == 6
    assert TagsFilter.from_expression("*").is_matched_by_consume_queue(12345)


async def test_transfer_limits_in_memory_and_on_disk(
    make_store: Callable[..., MessageStore],
) -> None:
    s = make_store(
        max_transfer_count_on_message_in_memory=4, max_transfer_bytes_on_message_in_disk=500,
        total_physical_memory=10_000, access_message_in_memory_max_ratio=40,
    )  # fmt: skip
    await s.start()
    try:
        for i in range(60):
            await s.put_message(msg(i, size=100))
        # the oldest messages are > 40% of 10 kB behind the end: "on disk", 500 bytes
        r = s.get_message("g", "TopicTest", 0, 0, 32)
        assert r.message_count == 2 and r.suggest_pulling_from_slave
        # the newest are "in memory": 4 messages
        r = s.get_message("g", "TopicTest", 0, 55, 32)
        assert r.message_count == 4 and not r.suggest_pulling_from_slave
    finally:
        await s.shutdown()


async def test_offsets_times_and_lookups(make_store: Callable[..., MessageStore]) -> None:
    clock = Clock()
    s = make_store(clock=clock)
    await s.start()
    try:
        times = []
        for i in range(40):
            clock.now += 1000
            times.append(clock.now)
            await s.put_message(msg(i))
        assert s.get_offset_in_queue_by_time("TopicTest", 0, 0) == 0
        assert s.get_offset_in_queue_by_time("TopicTest", 0, times[17]) == 17
        assert s.get_offset_in_queue_by_time("TopicTest", 0, times[17] - 1) == 17
        assert s.get_offset_in_queue_by_time("TopicTest", 0, times[-1] + 1) == 40
        assert s.get_earliest_message_time("TopicTest", 0) == times[0]
        assert s.get_earliest_message_time() == times[0]
        assert s.get_message_store_timestamp("TopicTest", 0, 5) == times[5]
        phy = s.get_commit_log_offset_in_queue("TopicTest", 0, 7)
        rec = decode_record(s.look_message_by_offset(phy) or b"")
        assert rec.queue_offset == 7
        assert s.look_message_by_offset(10**9) is None
    finally:
        await s.shutdown()


async def test_query_by_key_and_time(make_store: Callable[..., MessageStore]) -> None:
    clock = Clock()
    s = make_store(clock=clock)
    await s.start()
    try:
        for i in range(300):  # > max_index_num keys: several index files
            clock.now += 1000
            await s.put_message(msg(i, topic="Q"))
        assert len(s.index.files) >= 3
        r = s.query_message("Q", "key123", 32, 0, clock.now)
        assert [decode_record(m).properties()["KEYS"] for m in r.messages] == ["key123 common"]
        r = s.query_message("Q", "UNIQ00000007", 32, 0, clock.now)
        assert len(r.messages) == 1 and r.index_last_update_timestamp == clock.now
        r = s.query_message("Q", "common", 10, 0, clock.now)
        recs = [decode_record(m) for m in r.messages]
        assert len(recs) == 10 and recs[0].queue_offset == 299  # newest first
        start = 1_700_000_000_000
        r = s.query_message("Q", "common", 64, start + 100_500, start + 110_500)
        offsets = sorted(decode_record(m).queue_offset for m in r.messages)
        assert offsets == list(range(100, 110))
        assert s.query_message("Other", "key1", 32, 0, clock.now).messages == []
    finally:
        await s.shutdown()


async def test_arrival_waiters(store: MessageStore) -> None:
    seen: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda t, q, m: seen.append((t, q, m)))
    fut = store.wait_for_arrival("TopicTest", 1, 0)
    other = store.wait_for_arrival("TopicTest", 1, 1)
    assert not fut.done()
    await store.put_message(msg(0, queue_id=0))
    assert not fut.done()
    await store.put_message(msg(1, queue_id=1))
    assert await asyncio.wait_for(fut, 5) == 1
    assert not other.done()
    await store.put_message(msg(2, queue_id=1))
    assert await asyncio.wait_for(other, 5) == 2
    ready = store.wait_for_arrival("TopicTest", 1, 0)
    assert ready.done() and ready.result() == 2
    assert seen[-1] == ("TopicTest", 1, 2)
    pending = store.wait_for_arrival("TopicTest", 7, 0)
    await store.shutdown()
    assert pending.cancelled()


async def test_batches_are_indexed_across_index_files(
    make_store: Callable[..., MessageStore],
) -> None:
    s = make_store(max_index_num=50)
    await s.start()
    try:
        for b in range(10):
            items = [
                BatchItem(0, f"b{b}-{i}".encode(), properties_to_string({
                    "UNIQ_KEY": f"7F0000010F2C18B4AAC2{b * 100 + i:012X}", "KEYS": f"k{b}-{i}",
                }))
                for i in range(8)
            ]
            r = await s.put_messages(BatchMessage("B", encode_batch_body(items)))
            assert r.ok and r.msg_num == 8
        assert len(s.index.files) >= 3
        for b, i in [(0, 0), (4, 7), (9, 3)]:
            q = s.query_message("B", f"7F0000010F2C18B4AAC2{b * 100 + i:012X}", 4, 0, 2**62)
            assert [decode_record(m).body for m in q.messages] == [f"b{b}-{i}".encode()]
            q = s.query_message("B", f"k{b}-{i}", 4, 0, 2**62)
            assert [decode_record(m).body for m in q.messages] == [f"b{b}-{i}".encode()]
    finally:
        await s.shutdown()


async def test_schedule_topic_tags_code_is_the_delivery_time(store: MessageStore) -> None:
    m = BrokerMessage(
        "SCHEDULE_TOPIC_XXXX", b"later", queue_id=2,
        properties=properties_to_string({"DELAY": "3", "REAL_TOPIC": "T", "REAL_QID": "0"}),
    )  # fmt: skip
    r = await store.put_message(m)
    cq = store.queues.find("SCHEDULE_TOPIC_XXXX", 2)
    assert cq is not None
    entry = cq.get_entry(0)
    assert entry is not None and entry[2] == r.store_timestamp + 10_000
