"""Expired-file cleanup: RocketMQ's commit-log, consume-queue and index deletion rules, dry run.

How this works: every cleanResourceInterval the service probes disk usage of the commit-log
partition.  Commit-log segments (never the last) are deleted oldest first when it is a
`deleteWhen` hour, when usage passes diskMaxUsedSpaceRatio, or on a manual request, and
only if older than fileReservedTime hours unless usage passes diskSpaceCleanForciblyRatio
(then age is ignored).  At most DELETE_FILES_BATCH_MAX segments go per round, with
deletePhysicFilesInterval between two deletions; a held segment is retried and destroyed
after destroyMapedFileIntervalForcibly.  Then consume-queue segments whose last entry is
below the new commit-log minimum and index files whose endPhyOffset is below it go too and
queue minimum offsets are corrected.  Past diskSpaceWarningLevelRatio the store refuses
writes until usage falls back.  `plan()` computes the same decision without deleting.
The clock (ms) and the disk-usage probe (path -> used fraction) are injectable.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.common.service import Service
from engine.store.commit_log import CommitLog
from engine.store.config import MessageStoreConfig
from engine.store.consume_queue import CQ_STORE_UNIT_SIZE
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.index_service import IndexService
from engine.store.mapped_file import MappedFile
from engine.store.record_scan import SCHEDULE_TOPIC, scan_record

DELETE_FILES_BATCH_MAX = 10
MANUAL_DELETE_ROUNDS = 20

DiskUsageProbe = Callable[[str], float]


def default_disk_usage(path: str) -> float:
    """Used fraction (0..1) of the partition holding `path`, as Apache's
    `UtilAll.getDiskPartitionSpaceUsedPercent` and ``df`` count it: used over used plus
    what is still usable (blocks reserved for root left out), rounded up to a percent.
    Used over the whole partition read far less than Apache's brokers on the same disk."""
    try:
        u = shutil.disk_usage(path)
    except OSError:
        return 0.0
    entire = u.used + u.free  # shutil's free: the blocks usable by this user
    if not entire:
        return 0.0
    return -(-u.used * 100 // entire) / 100


@dataclass(frozen=True, slots=True)
class FileReport:
    """One file that a cleanup deleted (or, in a dry run, would delete)."""

    kind: str  # "commitlog" | "consumequeue" | "index"
    path: str
    min_offset: int  # physical (commit log, index) or logical (consume queue)
    max_offset: int
    first_time: int  # ms: first record's store time / index begin time (0 if unknown)
    last_time: int  # ms: last modification / index end time
    size: int  # bytes


@dataclass(frozen=True, slots=True)
class CleanupReport:
    dry_run: bool
    disk_usage: float
    reason: str  # why commit-log deletion ran ("" = it did not)
    clean_immediately: bool
    files: tuple[FileReport, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


class CleanupService(Service):
    """CleanCommitLogService + CleanConsumeQueueService."""

    name = "clean-expired-files"

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService,
        clock: Callable[[], int],
        disk_usage: DiskUsageProbe,
    ) -> None:
        super().__init__(config.clean_resource_interval / 1000)
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.clock = clock
        self.disk_usage = disk_usage
        self.disk_full = False
        self.manual_rounds = 0
        self._last_min = -1

    # ---- decisions
    def check_disk(self) -> float:
        """Probe usage; set or clear `disk_full` (diskSpaceWarningLevelRatio)."""
        usage = self.disk_usage(self.config.commit_log_dir)
        self.disk_full = usage > self.config.disk_space_warning_level_ratio / 100
        return usage

    def _is_delete_hour(self, now: int) -> bool:
        hour = time.localtime(now / 1000).tm_hour
        for tok in self.config.delete_when.split(";"):
            tok = tok.strip()
            if tok.isdigit() and int(tok) == hour:
                return True
        return False

    def _decide(self, now: int, usage: float, manual: bool) -> tuple[str, bool]:
        cfg = self.config
        immediate = cfg.clean_file_forcibly_enable and (
            usage > cfg.disk_space_clean_forcibly_ratio / 100
            or usage > cfg.disk_space_warning_level_ratio / 100
        )
        if usage > cfg.disk_max_used_space_ratio / 100:
            return f"disk usage {usage:.0%} above diskMaxUsedSpaceRatio", immediate
        if manual:
            return "manual request", immediate
        if self._is_delete_hour(now):
            return f"deleteWhen hour ({cfg.delete_when})", immediate
        return "", immediate

    # ---- reports
    def _commit_log_report(self, mf: MappedFile) -> FileReport:
        r = scan_record(mf.mm, 0, mf.wrote_position, mf.file_from_offset, check_crc=False)
        first = r.request.store_timestamp if r.request is not None else 0
        return FileReport(
            "commitlog", mf.file_name, mf.file_from_offset,
            mf.file_from_offset + mf.wrote_position, first, mf.last_modified_ms(), mf.file_size,
        )  # fmt: skip

    def _expired_commit_log(self, now: int, immediate: bool) -> list[MappedFile]:
        expired_ms = self.config.file_reserved_time * 3_600_000
        out: list[MappedFile] = []
        for mf in self.commit_log.mfq.files[:-1]:
            if len(out) >= DELETE_FILES_BATCH_MAX:
                break
            if not (immediate or now >= mf.last_modified_ms() + expired_ms):
                break
            out.append(mf)
        return out

    def _derived(self, new_min: int, dry_run: bool) -> list[FileReport]:
        """Consume-queue segments and index files wholly below commit-log offset `new_min`."""
        out: list[FileReport] = []
        now = self.clock()
        for cq in list(self.queues):
            gone = cq.mfq.delete_below(
                lambda mf, cq=cq: cq.last_entry_phys(mf) >= new_min,  # type: ignore[misc]
                self.config.destroy_maped_file_interval_forcibly, now, dry_run=dry_run,
            )  # fmt: skip
            for mf in gone:
                out.append(FileReport(
                    "consumequeue", mf.file_name, mf.file_from_offset // CQ_STORE_UNIT_SIZE,
                    (mf.file_from_offset + mf.wrote_position) // CQ_STORE_UNIT_SIZE,
                    0, mf.last_modified_ms() if not mf.closed else 0, mf.file_size,
                ))  # fmt: skip
            if not dry_run:  # as Apache's deleteExpiredFile: a kept segment may start below
                cq.correct_min_offset(new_min)
        for f in self.index.delete_expired(new_min, dry_run=dry_run):
            out.append(FileReport(
                "index", f.path, f.begin_phy_offset, f.end_phy_offset,
                f.begin_timestamp, f.end_timestamp, f.mf.file_size,
            ))  # fmt: skip
        return out

    def plan(self, manual: bool = True) -> CleanupReport:
        """Dry run: what a cleanup round would delete now, deleting nothing."""
        now = self.clock()
        usage = self.disk_usage(self.config.commit_log_dir)
        reason, immediate = self._decide(now, usage, manual)
        files: list[FileReport] = []
        if reason:
            doomed = self._expired_commit_log(now, immediate)
            files = [self._commit_log_report(mf) for mf in doomed]
            all_files = self.commit_log.mfq.files
            new_min = (
                all_files[len(doomed)].file_from_offset if doomed else self.commit_log.min_offset
            )
            files += self._derived(new_min, dry_run=True)
        return CleanupReport(True, usage, reason, immediate, tuple(files))

    # ---- actions
    def request_manual_delete(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: the next rounds delete regardless of deleteWhen; the
        first of them starts now rather than a cleanResourceInterval later."""
        self.manual_rounds = MANUAL_DELETE_ROUNDS
        if self.running:
            self.wakeup()

    async def clean(self, manual: bool = False) -> CleanupReport:
        """One round: commit-log segments first, then what depended on them."""
        cfg = self.config
        now = self.clock()
        usage = self.check_disk()
        if self.manual_rounds > 0:
            manual = True
            self.manual_rounds -= 1
        reason, immediate = self._decide(now, usage, manual)
        files: list[FileReport] = []
        if reason:
            mfq = self.commit_log.mfq
            for i in range(DELETE_FILES_BATCH_MAX):
                doomed = self._expired_commit_log(self.clock(), immediate)
                if not doomed:
                    break
                mf = doomed[0]
                report = self._commit_log_report(mf)
                if not mfq.delete_expired_by_time(
                    cfg.file_reserved_time * 3_600_000, 0,
                    cfg.destroy_maped_file_interval_forcibly, immediate, self.clock(), 1,
                ):  # fmt: skip
                    break
                files.append(report)
                if i + 1 < DELETE_FILES_BATCH_MAX and cfg.delete_physic_files_interval > 0:
                    await asyncio.sleep(cfg.delete_physic_files_interval / 1000)
        new_min = self.commit_log.min_offset
        if new_min != self._last_min:
            files += self._derived(new_min, dry_run=False)
            self._last_min = new_min
        self.check_disk()
        return CleanupReport(False, usage, reason, immediate, tuple(files))

    def clean_expired_consume_queues(self) -> list[str]:
        """CLEAN_EXPIRED_CONSUMEQUEUE: destroy queues whose last entry is below the commit log."""
        phy_min = self.commit_log.min_offset
        removed: list[str] = []
        for cq in list(self.queues):
            if cq.topic == SCHEDULE_TOPIC:
                continue
            last = cq.mfq.last
            if last is None or cq.last_entry_phys(last) < phy_min:
                removed.append(f"{cq.topic}/{cq.queue_id}")
                self.queues.remove(cq)
        return removed

    async def run_once(self) -> None:
        await self.clean()
