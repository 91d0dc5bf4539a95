"""Flush: SYNC_FLUSH group commit, FLUSH_DISK_TIMEOUT, ASYNC_FLUSH, checkpoint on shutdown."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

import pytest

from engine.protocol.message import BatchItem, BatchMessage, encode_batch_body
from engine.store import FlushDiskType, MessageStore, PutMessageResult, PutMessageStatus
from engine.store.checkpoint import StoreCheckpoint
from tests.store.helpers import Clock, msg


async def test_sync_flush_puts_return_flushed_and_share_fsyncs(
    make_store: Callable[..., MessageStore],
) -> None:
    s = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    await s.start()
    try:
        results = await asyncio.gather(*(s.put_message(msg(i, queue_id=i % 4)) for i in range(200)))
        assert all(r.ok for r in results)
        end = max(r.wrote_offset + r.wrote_bytes for r in results)
        assert s.get_flushed_offset() >= end
        assert s.group_commit is not None
        assert s.group_commit.flush_count < 100  # 200 puts, far fewer flush rounds
        r = await s.put_message(msg(999))
        assert r.ok and s.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes
    finally:
        await s.shutdown()


def batch(first: int, count: int = 4, queue_id: int = 0) -> BatchMessage:
    items = [msg(i) for i in range(first, first + count)]
    body = encode_batch_body(BatchItem(0, m.body, m.properties) for m in items)
    return BatchMessage("TopicTest", body, queue_id=queue_id, born_host=("10.0.0.2", 5000))


async def put(s: MessageStore, i: int, batched: bool) -> PutMessageResult:
    """One put_message, or one put_messages of a batch of 4."""
    return await (s.put_messages(batch(i * 4)) if batched else s.put_message(msg(i)))


async def test_sync_flush_batches_return_flushed_and_refused_puts_do_not_wait(
    make_store: Callable[..., MessageStore],
) -> None:
    s = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    await s.start()
    try:
        results = await asyncio.gather(*(s.put_messages(batch(i * 4, queue_id=i % 4))
                                         for i in range(50)))
        assert all(r.ok and r.msg_num == 4 for r in results)
        assert s.get_flushed_offset() >= max(r.wrote_offset + r.wrote_bytes for r in results)
        s.writes_refused = "role switch"
        for batched in (False, True):
            r = await put(s, 99, batched)
            assert (r.status, r.error_message) == (PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                                   "role switch")
    finally:
        await s.shutdown()


@pytest.mark.parametrize("batched", [False, True], ids=["put_message", "put_messages"])
async def test_sync_flush_before_start_flushes_in_place(
    make_store: Callable[..., MessageStore], batched: bool
) -> None:
    s = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)  # loaded, not started
    try:
        r = await put(s, 1, batched)
        assert r.ok and s.group_commit is None
        assert s.get_flushed_offset() == s.get_max_phy_offset() == r.wrote_offset + r.wrote_bytes
    finally:
        s.close()


@pytest.mark.parametrize("batched", [False, True], ids=["put_message", "put_messages"])
async def test_sync_flush_timeout(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    s = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=50)
    await s.start()
    release = threading.Event()
    real_flush = s.commit_log.mfq.flush

    def stuck_flush(least_pages: int = 0) -> bool:
        release.wait(10)
        return real_flush(least_pages)

    monkeypatch.setattr(s.commit_log.mfq, "flush", stuck_flush)
    try:
        r = await put(s, 1, batched)
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert "syncFlushTimeout" in r.error_message
        assert r.msg_num == (4 if batched else 1)
        # stored, just not confirmed
        assert s.get_max_offset_in_queue("TopicTest", 0) == r.msg_num
    finally:
        release.set()
        await s.shutdown()


async def test_async_flush_runs_in_background(make_store: Callable[..., MessageStore]) -> None:
    s = make_store(flush_interval_commit_log=1, flush_commit_log_least_pages=0)
    await s.start()
    try:
        for i in range(30):
            assert (await s.put_message(msg(i))).ok
        for _ in range(500):
            if s.get_flushed_offset() == s.get_max_phy_offset():
                break
            await asyncio.sleep(0.01)
        assert s.get_flushed_offset() == s.get_max_phy_offset()
    finally:
        await s.shutdown()


async def test_shutdown_writes_checkpoint_and_removes_abort(
    make_store: Callable[..., MessageStore],
) -> None:
    clock = Clock()
    s = make_store(clock=clock)
    await s.start()
    assert os.path.exists(s.config.abort_path)
    for i in range(10):
        clock.now += 10
        await s.put_message(msg(i))
    await s.shutdown()
    assert not os.path.exists(s.config.abort_path)
    cp = StoreCheckpoint(s.config.checkpoint_path)
    try:
        assert cp.physic_msg_timestamp == clock.now
        assert cp.logics_msg_timestamp == clock.now
        assert cp.index_msg_timestamp == clock.now
        assert os.path.getsize(s.config.checkpoint_path) == 4096
    finally:
        cp.close()
