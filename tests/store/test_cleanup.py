"""Expired-file cleanup with an injectable clock and disk-usage probe."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from engine.store import GetMessageStatus, MessageStore, PutMessageStatus
from tests.store.helpers import Clock, msg

HOUR = 3_600_000


class Disk:
    def __init__(self) -> None:
        self.usage = 0.10

    def __call__(self, path: str) -> float:
        return self.usage


def _local_ms(hour: int, day: int = 15) -> int:
    return int(time.mktime((2024, 1, day, hour, 30, 0, 0, 0, -1)) * 1000)


async def _filled(
    make_store: Callable[..., MessageStore], clock: Clock, disk: Disk, n: int = 150, **kw: object
) -> MessageStore:
    s = make_store(clock=clock, disk_usage=disk, clean_resource_interval=3_600_000, **kw)
    await s.start()
    for i in range(n):
        assert (await s.put_message(msg(i, queue_id=i % 2, size=300))).ok
    return s


def _age_files(s: MessageStore, age_ms: int, now: int, count: int | None = None) -> None:
    for mf in s.commit_log.mfq.files[:count]:
        t = (now - age_ms) / 1000
        os.utime(mf.file_name, (t, t))


async def test_deletes_expired_at_delete_hour_only(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(10)), Disk()
    s = await _filled(make_store, clock, disk)
    try:
        files = list(s.commit_log.mfq.files)
        assert len(files) > 12
        _age_files(s, 73 * HOUR, clock.now)
        r = await s.delete_expired_files(manual=False)
        assert r.files == () and r.reason == ""
        clock.now = _local_ms(4, day=16)
        r = await s.delete_expired_files(manual=False)
        assert "deleteWhen" in r.reason
        gone = [f for f in r.files if f.kind == "commitlog"]
        assert len(gone) == 10  # DELETE_FILES_BATCH_MAX per round
        assert [f.path for f in gone] == [mf.file_name for mf in files[:10]]
        assert not any(os.path.exists(f.path) for f in gone)
        assert s.get_min_phy_offset() == files[10].file_from_offset
        # consume queues lost their old segments and their min offsets moved up
        assert any(f.kind == "consumequeue" for f in r.files)
        min0 = s.get_min_offset_in_queue("TopicTest", 0)
        assert min0 > 0
        g = s.get_message("g", "TopicTest", 0, 0, 32)
        assert g.status is GetMessageStatus.OFFSET_TOO_SMALL and g.next_begin_offset == min0
        g = s.get_message("g", "TopicTest", 0, min0, 1)
        assert g.status is GetMessageStatus.FOUND
        r = await s.delete_expired_files(manual=False)  # next round: the rest but the last
        assert len([f for f in r.files if f.kind == "commitlog"]) == len(files) - 11
        assert len(s.commit_log.mfq.files) == 1
    finally:
        await s.shutdown()


async def test_young_files_stay_unless_disk_passes_forcible_ratio(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(10)), Disk()
    s = await _filled(make_store, clock, disk)
    try:
        _age_files(s, 1 * HOUR, clock.now)
        disk.usage = 0.80  # above diskMaxUsedSpaceRatio: runs, but files are young
        r = await s.delete_expired_files(manual=False)
        assert "diskMaxUsedSpaceRatio" in r.reason and r.files == ()
        _age_files(s, 80 * HOUR, clock.now, count=3)
        r = await s.delete_expired_files(manual=False)
        assert len([f for f in r.files if f.kind == "commitlog"]) == 3
        disk.usage = 0.86  # above diskSpaceCleanForciblyRatio: age ignored
        r = await s.delete_expired_files(manual=False)
        assert r.clean_immediately and len([f for f in r.files if f.kind == "commitlog"]) == 10
    finally:
        await s.shutdown()


async def test_disk_full_refuses_writes_until_space_returns(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(10)), Disk()
    s = await _filled(make_store, clock, disk, n=5)
    try:
        disk.usage = 0.95
        await s.delete_expired_files(manual=False)
        assert s.disk_full
        r = await s.put_message(msg(100))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "diskSpaceWarningLevelRatio" in r.error_message
        disk.usage = 0.5
        await s.delete_expired_files(manual=False)
        assert not s.disk_full
        assert (await s.put_message(msg(101))).ok
    finally:
        await s.shutdown()


async def test_dry_run_reports_and_deletes_nothing(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(10)), Disk()
    s = await _filled(make_store, clock, disk)
    try:
        _age_files(s, 100 * HOUR, clock.now, count=4)
        before = [Path(mf.file_name).name for mf in s.commit_log.mfq.files]
        plan = s.plan_expired_files()
        assert plan.dry_run and plan.reason == "manual request"
        cl = [f for f in plan.files if f.kind == "commitlog"]
        assert [Path(f.path).name for f in cl] == before[:4]
        assert cl[0].min_offset == 0 and cl[0].max_offset == 4096 and cl[0].size == 4096
        assert cl[0].first_time > 0 and cl[0].last_time <= clock.now - 100 * HOUR
        assert any(f.kind == "consumequeue" for f in plan.files)
        assert plan.total_bytes >= 4 * 4096
        assert all(os.path.exists(Path(s.config.commit_log_dir, n)) for n in before)
        # the manual trigger does what the plan said
        s.cleanup.request_manual_delete()
        r = await s.delete_expired_files(manual=False)
        assert [f.path for f in r.files if f.kind == "commitlog"] == [f.path for f in cl]
    finally:
        await s.shutdown()


async def test_held_file_is_destroyed_after_forcible_interval(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(4)), Disk()
    s = await _filled(make_store, clock, disk, destroy_maped_file_interval_forcibly=60_000)
    try:
        _age_files(s, 100 * HOUR, clock.now)
        first = s.commit_log.mfq.files[0]
        assert first.hold()
        r = await s.delete_expired_files(manual=False)
        assert r.files == () and os.path.exists(first.file_name)
        clock.now += 30_000
        assert (await s.delete_expired_files(manual=False)).files == ()
        clock.now += 31_000
        r = await s.delete_expired_files(manual=False)
        assert r.files[0].path == first.file_name and not os.path.exists(first.file_name)
    finally:
        await s.shutdown()


async def test_index_files_and_expired_queues_go_too(
    make_store: Callable[..., MessageStore],
) -> None:
    clock, disk = Clock(_local_ms(4)), Disk()
    s = await _filled(make_store, clock, disk, n=150, max_index_num=40)
    try:
        for i in range(20):  # the last segment holds only "Late" messages
            await s.put_message(msg(i, topic="Late", size=300))
        n_index = len(s.index.files)
        assert n_index > 3
        _age_files(s, 100 * HOUR, clock.now)
        r = await s.delete_expired_files(manual=False)
        r2 = await s.delete_expired_files(manual=False)
        kinds = {f.kind for f in r.files + r2.files}
        assert kinds == {"commitlog", "consumequeue", "index"}
        assert len(s.index.files) < n_index
        assert s.clean_expired_consume_queues() == ["TopicTest/0", "TopicTest/1"]
        assert s.get_max_offset_in_queue("Late", 0) == 20
    finally:
        await s.shutdown()


async def test_min_offsets_move_when_a_kept_queue_segment_points_below(
    make_store: Callable[..., MessageStore],
) -> None:
    """Commit-log segments go while the consume-queue segment that indexes them stays (it
    also indexes newer messages): the queue's min offset still moves past them, so reads at
    old offsets get OFFSET_TOO_SMALL and the next valid offset."""
    clock, disk = Clock(_local_ms(10)), Disk()
    s = await _filled(make_store, clock, disk, n=60, mapped_file_size_consume_queue=20 * 1000)
    try:
        files = list(s.commit_log.mfq.files)
        assert len(files) > 3
        _age_files(s, 73 * HOUR, clock.now, count=2)
        r = await s.delete_expired_files(manual=True)
        assert [f.path for f in r.files if f.kind == "commitlog"] == [
            mf.file_name for mf in files[:2]]
        assert not [f for f in r.files if f.kind == "consumequeue"]
        for queue_id in (0, 1):
            low = s.get_min_offset_in_queue("TopicTest", queue_id)
            assert low > 0
            g = s.get_message("g", "TopicTest", queue_id, 0, 32)
            assert g.status is GetMessageStatus.OFFSET_TOO_SMALL and g.next_begin_offset == low
            found = s.get_message("g", "TopicTest", queue_id, low, 1)
            assert found.status is GetMessageStatus.FOUND
            phys = s.get_commit_log_offset_in_queue("TopicTest", queue_id, low)
            assert phys >= files[2].file_from_offset
            assert s.get_commit_log_offset_in_queue("TopicTest", queue_id, low - 1) < phys
    finally:
        await s.shutdown()
