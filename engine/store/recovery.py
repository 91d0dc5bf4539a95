"""Startup recovery: find the valid end of the commit log, trim and rebuild what depends on it.

How this works (store-format.md §6): consume queues are recovered first (each to its first
invalid entry).  After a clean shutdown the commit log is scanned from its 3rd-last
segment; after a crash (abort file present) from the newest segment whose first record
was stored no later than the checkpoint's minimum time.  The scan validates magic, sizes
and (if configured) body CRC and stops at the first invalid record: that is the new end.
Everything past it goes (commit-log tail, consume-queue entries, index files), and the
dispatcher re-builds consume queues and index from the scan start (abnormal) or from the
consume queues' end (normal); dispatch is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.checkpoint import StoreCheckpoint
from engine.store.commit_log import CommitLog
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.dispatch import Dispatcher
from engine.store.index_service import IndexService
from engine.store.mapped_file import MappedFile
from engine.store.record_scan import scan_record


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery did (logged by the facade, asserted by tests)."""

    abnormal: bool
    scan_from: int
    process_offset: int
    truncated_bytes: int
    redispatched: int


def scan_forward(files: list[MappedFile], start: int, check_crc: bool) -> int:
    """Global offset of the end of the last valid record, scanning from `files[start]`."""
    process = files[start].file_from_offset if files else 0
    for i in range(start, len(files)):
        mf = files[i]
        pos = 0
        limit = mf.file_size
        mm = mf.mm
        base = mf.file_from_offset
        while pos < limit:
            r = scan_record(mm, pos, limit, base, check_crc=check_crc)
            if r.request is None:
                break
            pos += r.size
        else:
            process = base + pos
            continue  # the segment is exactly full: go on
        if r.blank and i + 1 < len(files):
            process = files[i + 1].file_from_offset
            continue
        return base + pos
    return process


def _abnormal_start(files: list[MappedFile], min_ts: int, check_crc: bool) -> int:
    for i in range(len(files) - 1, -1, -1):
        mf = files[i]
        r = scan_record(mf.mm, 0, mf.file_size, mf.file_from_offset, check_crc=check_crc)
        if r.request is not None and 0 < r.request.store_timestamp <= min_ts:
            return i
    return 0


def recover(
    commit_log: CommitLog,
    queues: ConsumeQueueTable,
    index: IndexService,
    dispatcher: Dispatcher,
    checkpoint: StoreCheckpoint,
    *,
    last_exit_ok: bool,
    check_crc: bool,
    index_safe: bool,
) -> RecoveryReport:
    """Recover the store in place (see the module docstring)."""
    queues.recover()
    mfq = commit_log.mfq
    files = mfq.files
    if not files:
        queues.destroy()
        index.destroy()
        commit_log.topic_queue_table = {}
        dispatcher.reput_from_offset = 0
        return RecoveryReport(not last_exit_ok, 0, 0, 0, 0)
    if last_exit_ok:
        start = max(0, len(files) - 3)
    else:
        min_ts = checkpoint.min_timestamp_index() if index_safe else checkpoint.min_timestamp()
        start = _abnormal_start(files, min_ts, check_crc)
    scan_from = files[start].file_from_offset
    process = scan_forward(files, start, check_crc)
    last = mfq.find(process) or files[-1]
    truncated = 0
    if last.file_from_offset <= process < last.file_end_offset:
        truncated = _nonzero_tail(last, process - last.file_from_offset)
    mfq.truncate_dirty(process)
    mfq.flushed_where = process
    queues.truncate_dirty(process)
    index.truncate(process)
    if last_exit_ok:
        cq_max = max((cq.max_physic_offset for cq in queues), default=-1)
        dispatcher.reput_from_offset = max(cq_max, mfq.min_offset())
    else:
        dispatcher.reput_from_offset = scan_from
    redispatched = dispatcher.reput(until=process)
    commit_log.topic_queue_table = queues.queue_offsets()
    queues.correct_min_offsets(mfq.min_offset())
    return RecoveryReport(not last_exit_ok, scan_from, process, truncated, redispatched)


def _nonzero_tail(mf: MappedFile, pos: int) -> int:
    """How many bytes after `pos` were not zero (what truncation discards), roughly."""
    tail = mf.read_raw(pos, min(mf.file_size - pos, 4 << 20))
    return len(tail.rstrip(b"\x00"))
