"""Flush: SYNC_FLUSH group commit, FLUSH_DISK_TIMEOUT, ASYNC_FLUSH, checkpoint on shutdown."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

import pytest

from engine.store import FlushDiskType, MessageStore, PutMessageStatus
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


async def test_sync_flush_timeout(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
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
        r = await s.put_message(msg(1))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert "syncFlushTimeout" in r.error_message
        assert s.get_max_offset_in_queue("TopicTest", 0) == 1  # stored, just not confirmed
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
