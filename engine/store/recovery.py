"""Startup recovery: find the valid end of the commit log, trim and rebuild what depends on it.

How this works.  The checkpoint's recovery offset P (checkpoint.py) is a record boundary
below which every record, consume-queue entry and index entry was on disk when it was
written.  With a valid P, after a crash or a clean shutdown alike:

1. every consume queue is cut after the entries of records ending by P (binary search
   in its last file) and the index drops its entries for records at or past P;
2. the commit log is scanned from P, validating magic, sizes, topic, physical offset and
   (with checkCRCOnRecover) the body CRC, and each valid record is dispatched again to the
   consume queues and the index in the same pass; the first invalid record is the end;
3. bytes past the end are zeroed and later segments deleted.

So the work is what was written after the last checkpoint, whatever the store's size.
Without a valid P (a store written by RocketMQ, or a P outside the log) the RocketMQ
rules apply (store-format.md §6): consume queues recover to their first invalid entry;
the scan starts at the 3rd-last segment after a clean shutdown, and after a crash at the
newest segment whose first record is not newer than the checkpoint's minimum time.  If
the consume queues are missing altogether, they and the index are rebuilt from the
first segment: deleting `consumequeue/` is how an operator asks for a rebuild.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from engine.store.checkpoint import StoreCheckpoint
from engine.store.commit_log import CommitLog
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.dispatch import Dispatcher
from engine.store.index_service import IndexService
from engine.store.mapped_file import MappedFile
from engine.store.mapped_file_queue import MappedFileQueue
from engine.store.record_scan import scan_record

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery did (logged by the facade, asserted by tests)."""

    abnormal: bool
    scan_from: int
    process_offset: int
    truncated_bytes: int
    redispatched: int
    from_checkpoint: bool = False  # the scan started at the checkpoint's recovery offset


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


def _checkpoint_start(mfq: MappedFileQueue, queues: ConsumeQueueTable, p: int | None) -> int | None:
    """Where to start verifying, from the checkpoint's recovery offset `p`; None if the
    RocketMQ rules must decide."""
    if p is None:
        return None
    files = mfq.files
    first, last = files[0], files[-1]
    if mfq.short_last_file and p > last.file_from_offset:  # cut by something else
        log.warning("%s is shorter than a segment: verifying all of it", last.file_name)
        p = last.file_from_offset
    if p > last.file_end_offset:
        log.warning("checkpoint recovery offset %d is past the commit log's end %d: "
                    "recovering by timestamps", p, last.file_end_offset)  # fmt: skip
        return None
    if p > first.file_from_offset and not os.path.isdir(queues.root):
        log.warning("%s is missing: rebuilding consume queues and index from the commit log",
                    queues.root)  # fmt: skip
        return first.file_from_offset
    return max(p, first.file_from_offset)


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
    mfq = commit_log.mfq
    files = mfq.files
    if not files:
        queues.destroy()
        index.destroy()
        commit_log.topic_queue_table = {}
        dispatcher.reput_from_offset = 0
        return RecoveryReport(not last_exit_ok, 0, 0, 0, 0)
    scan_from = _checkpoint_start(mfq, queues, checkpoint.recovery_offset)
    redispatched = 0
    if scan_from is not None:  # verify and dispatch in one pass, to the first invalid record
        queues.recover_to(scan_from)
        index.truncate(scan_from)
        dispatcher.reput_from_offset = scan_from
        check, dispatcher.check_crc = dispatcher.check_crc, check_crc
        try:
            redispatched = dispatcher.reput()
        finally:
            dispatcher.check_crc = check
        process = dispatcher.reput_from_offset
    else:
        queues.recover()
        if last_exit_ok:
            start = max(0, len(files) - 3)
        else:
            min_ts = checkpoint.min_timestamp_index() if index_safe else checkpoint.min_timestamp()
            start = _abnormal_start(files, min_ts, check_crc)
        process = scan_forward(files, start, check_crc)
    last = mfq.find(process) or files[-1]
    truncated = 0
    if last.file_from_offset <= process < last.file_end_offset:
        truncated = _nonzero_tail(last, process - last.file_from_offset)
    if checkpoint.recovery_offset is not None and checkpoint.recovery_offset > process:
        checkpoint.lower(process)
    mfq.truncate_dirty(process)
    mfq.flushed_where = process
    if scan_from is None:
        queues.truncate_dirty(process)
        index.truncate(process)
        if last_exit_ok:
            cq_max = max((cq.max_physic_offset for cq in queues), default=-1)
            dispatcher.reput_from_offset = max(cq_max, mfq.min_offset())
        else:
            dispatcher.reput_from_offset = files[start].file_from_offset
        scan_from = dispatcher.reput_from_offset
        redispatched = dispatcher.reput(until=process)
        from_checkpoint = False
    else:
        from_checkpoint = True
    commit_log.topic_queue_table = queues.queue_offsets()
    queues.correct_min_offsets(mfq.min_offset())
    return RecoveryReport(
        not last_exit_ok, scan_from, process, truncated, redispatched, from_checkpoint
    )


def _nonzero_tail(mf: MappedFile, pos: int) -> int:
    """How many bytes after `pos` were not zero (what truncation discards), roughly."""
    tail = mf.read_raw(pos, min(mf.file_size - pos, 4 << 20))
    return len(tail.rstrip(b"\x00"))
