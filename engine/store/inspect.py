"""Offline store inspector: `python -m engine.store.inspect DIR [--json] [--no-crc]`.

Reads a store directory (ours or Apache RocketMQ's) read-only, relying only on the on-disk
format: commit-log segments (record counts, first/last store time, CRC and layout
errors), consume queues (entries checked against the records they point at), index files
(headers) and the checkpoint.  Exit status 0 when consistent, 1 when problems were found,
2 when DIR is not a store.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.store.checkpoint import CHECKPOINT, CHECKPOINT_FILE_SIZE, read_recovery_offset
from engine.store.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE, is_blank_entry
from engine.store.index_file import INDEX_HEADER
from engine.store.record_scan import scan_record

_ZERO_CHUNK = bytes(1 << 20)


@dataclass
class SegmentReport:
    name: str
    size: int
    records: int = 0
    bytes_used: int = 0
    first_store_time: int = 0
    last_store_time: int = 0
    ends_with_blank: bool = False
    log_end: int = -1  # where the log ends (a zero record header) if in or before this segment
    note: str = ""  # how the log ends in this segment, "" if it goes on or the segment is full
    error: str = ""  # first invalid record (position and reason), "" if none


@dataclass
class QueueReport:
    topic: str
    queue_id: int
    files: int
    min_offset: int
    max_offset: int
    checked: int = 0
    expired: int = 0  # entries pointing below the commit log's first segment
    mismatches: list[str] = field(default_factory=list)


@dataclass
class StoreReport:
    root: str
    segments: list[SegmentReport] = field(default_factory=list)
    queues: list[QueueReport] = field(default_factory=list)
    index_files: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@contextmanager
def _mapped(path: str) -> Iterator[mmap.mmap | bytes]:
    size = os.path.getsize(path)
    if size == 0:
        yield b""
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        yield mm


def _segments(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(n for n in os.listdir(directory) if n.isdigit())


def _fmt(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _first_non_zero(mm: mmap.mmap | bytes, pos: int, limit: int) -> int:
    """Position of the first non-zero byte of `mm[pos:limit]`, -1 if they are all zeros."""
    while pos < limit:
        end = min(pos + len(_ZERO_CHUNK), limit)
        chunk = mm[pos:end]
        if chunk != _ZERO_CHUNK[: end - pos]:
            return pos + len(chunk) - len(chunk.lstrip(b"\0"))
        pos = end
    return -1


def _scan_segment(rep: SegmentReport, mm: mmap.mmap | bytes, check_crc: bool) -> bool:
    """Count the records of one segment; True if the log ends in it (a zero record header)."""
    base = int(rep.name)
    pos, limit = 0, len(mm)
    ended = False
    while pos < limit:
        r = scan_record(mm, pos, limit, base, check_crc=check_crc)
        if r.request is not None:
            rep.records += 1
            ts = r.request.store_timestamp
            rep.first_store_time = rep.first_store_time or ts
            rep.last_store_time = ts
            pos += r.size
            continue
        if r.blank:
            rep.ends_with_blank = True
        elif any(mm[pos : min(limit, pos + 8)]):
            rep.error = f"offset {base + pos}: {r.reason}"
        else:
            ended = True
        break
    rep.bytes_used = pos
    return ended


def inspect_commit_log(directory: str, check_crc: bool) -> list[SegmentReport]:
    """Scan every segment; the log ends at the first zero record header, as recovery ends it.

    Apache RocketMQ pre-allocates segments full of zeros, so a live or crashed store has an
    unwritten zero tail after its last record and often an empty next segment.
    """
    out: list[SegmentReport] = []
    log_end = -1
    for name in _segments(directory):
        path = os.path.join(directory, name)
        rep = SegmentReport(name, os.path.getsize(path))
        with _mapped(path) as mm:
            if log_end < 0 and _scan_segment(rep, mm, check_crc):
                log_end = rep.log_end = int(name) + rep.bytes_used
                dirty = _first_non_zero(mm, rep.bytes_used, len(mm))
                rep.note = (
                    f"log ends at offset {log_end}, the rest of the segment is unwritten"
                    if dirty < 0 else
                    f"log ends at offset {log_end}; non-zero bytes from offset "
                    f"{int(name) + dirty} on, which recovery drops"
                )  # fmt: skip
            elif log_end >= 0:
                rep.log_end = log_end
                if _first_non_zero(mm, 0, len(mm)) < 0:
                    rep.note = f"unwritten (pre-allocated), the log ends at offset {log_end}"
                else:
                    _scan_segment(rep, mm, check_crc)
                    what = "records" if rep.records else "data"
                    rep.error = f"{what} after the end of the log at offset {log_end}"
        out.append(rep)
    return out


def inspect_queues(root: str, commit_dir: str, check_crc: bool) -> list[QueueReport]:
    names = _segments(commit_dir)
    seg_size = os.path.getsize(os.path.join(commit_dir, names[0])) if names else 0
    commit_min = int(names[0]) if names else 0
    cq_root = os.path.join(root, "consumequeue")
    out: list[QueueReport] = []
    if not os.path.isdir(cq_root):
        return out
    maps: dict[str, Any] = {}
    try:
        for topic in sorted(os.listdir(cq_root)):
            tdir = os.path.join(cq_root, topic)
            for qname in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
                if not qname.isdigit():
                    continue
                qdir = os.path.join(tdir, qname)
                files = _segments(qdir)
                rep = QueueReport(topic, int(qname), len(files), -1, 0)
                for fname in files:
                    with open(os.path.join(qdir, fname), "rb") as f:
                        data = f.read()
                    start = int(fname) // CQ_STORE_UNIT_SIZE
                    for n, (phy, size, tags) in enumerate(CQ_ENTRY.iter_unpack(
                        data[: len(data) - len(data) % CQ_STORE_UNIT_SIZE]
                    )):  # fmt: skip
                        if phy < 0 or size <= 0:
                            break
                        logical = start + n
                        rep.max_offset = logical + 1
                        if is_blank_entry(phy, size):
                            continue
                        if rep.min_offset < 0 and phy >= commit_min:
                            rep.min_offset = logical
                        if phy < commit_min:
                            rep.expired += 1
                            continue
                        rep.checked += 1
                        problem = _check_entry(
                            maps, commit_dir, seg_size, phy, size, tags, topic, int(qname),
                            logical, check_crc,
                        )  # fmt: skip
                        if problem and len(rep.mismatches) < 20:
                            rep.mismatches.append(f"offset {logical}: {problem}")
                rep.min_offset = max(rep.min_offset, 0) if rep.min_offset >= 0 else rep.max_offset
                out.append(rep)
    finally:
        for f, mm in maps.values():
            mm.close()
            f.close()
    return out


def _check_entry(
    maps: dict[str, Any], commit_dir: str, seg_size: int, phy: int, size: int, tags: int,
    topic: str, queue_id: int, logical: int, check_crc: bool,
) -> str:  # fmt: skip
    if seg_size <= 0:
        return "no commit log"
    base = phy - phy % seg_size
    name = f"{base:020d}"
    if name not in maps:
        path = os.path.join(commit_dir, name)
        if not os.path.exists(path):
            return f"commit-log segment {name} missing"
        f = open(path, "rb")  # noqa: SIM115 - kept open for the whole scan
        maps[name] = (f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    mm = maps[name][1]
    r = scan_record(mm, phy - base, len(mm), base, check_crc=check_crc)
    req = r.request
    if req is None:
        return f"no valid record at physical offset {phy}: {r.reason or 'blank'}"
    if req.msg_size != size:
        return f"size {size} != record size {req.msg_size}"
    if (req.topic, req.queue_id, req.consume_queue_offset) != (topic, queue_id, logical):
        return f"record is {req.topic}/{req.queue_id}@{req.consume_queue_offset}"
    if tags != req.tags_code and topic != "SCHEDULE_TOPIC_XXXX":
        return f"tags code {tags} != {req.tags_code}"
    return ""


def inspect_store(root: str, check_crc: bool = True) -> StoreReport:
    rep = StoreReport(root)
    commit_dir = os.path.join(root, "commitlog")
    rep.segments = inspect_commit_log(commit_dir, check_crc)
    sizes = {s.size for s in rep.segments}
    if len(sizes) > 1:
        rep.problems.append(f"commit-log segments have different sizes: {sorted(sizes)}")
    for prev, nxt in zip(rep.segments, rep.segments[1:], strict=False):
        if int(nxt.name) != int(prev.name) + prev.size:
            rep.problems.append(f"gap between segments {prev.name} and {nxt.name}")
    for s in rep.segments:
        if s.error:
            rep.problems.append(f"segment {s.name}: {s.error}")
    rep.queues = inspect_queues(root, commit_dir, check_crc)
    for q in rep.queues:
        for m in q.mismatches:
            rep.problems.append(f"queue {q.topic}/{q.queue_id} {m}")
    index_dir = os.path.join(root, "index")
    for name in _segments(index_dir):
        with open(os.path.join(index_dir, name), "rb") as f:
            head = f.read(INDEX_HEADER.size)
        if len(head) == INDEX_HEADER.size:
            b, e, bp, ep, slots, count = INDEX_HEADER.unpack(head)
            rep.index_files.append({
                "name": name, "beginTimestamp": b, "endTimestamp": e, "beginPhyOffset": bp,
                "endPhyOffset": ep, "hashSlotCount": slots, "indexCount": count,
            })  # fmt: skip
    cp = os.path.join(root, "checkpoint")
    if os.path.exists(cp):
        with open(cp, "rb") as f:
            raw = f.read(CHECKPOINT_FILE_SIZE)
        if len(raw) == CHECKPOINT_FILE_SIZE:
            p, lg, ix = CHECKPOINT.unpack_from(raw)
            rep.checkpoint = {"physicMsgTimestamp": p, "logicsMsgTimestamp": lg,
                              "indexMsgTimestamp": ix}  # fmt: skip
            slot = read_recovery_offset(raw)
            if slot is not None:
                rep.checkpoint["recoveryOffset"] = slot[1]
    return rep


def render(rep: StoreReport) -> str:
    lines = [f"store {rep.root}", "", "commit log:"]
    lines.append(f"  {'segment':<22}{'records':>9}{'used':>12}  {'first store time':<24}"
                 f"{'last store time':<24}status")  # fmt: skip
    for s in rep.segments:
        status = s.error or s.note or ("full" if s.ends_with_blank else "open")
        lines.append(
            f"  {s.name:<22}{s.records:>9}{s.bytes_used:>12}  {_fmt(s.first_store_time):<24}"
            f"{_fmt(s.last_store_time):<24}{status}"
        )
    total = sum(s.records for s in rep.segments)
    ends = [s.log_end for s in rep.segments if s.log_end >= 0]
    lines.append(f"  {len(rep.segments)} segments, {total} records"
                 + (f", log ends at offset {ends[0]}" if ends else ""))  # fmt: skip
    lines += ["", "consume queues:"]
    for q in rep.queues:
        state = "ok" if not q.mismatches else f"{len(q.mismatches)} mismatches"
        lines.append(
            f"  {q.topic}/{q.queue_id}: offsets [{q.min_offset}, {q.max_offset}) in {q.files} "
            f"files, {q.checked} checked, {q.expired} expired, {state}"
        )
    lines += ["", "index files:"]
    for ix in rep.index_files:
        lines.append(
            f"  {ix['name']}: {ix['indexCount'] - 1} entries, phy [{ix['beginPhyOffset']}, "
            f"{ix['endPhyOffset']}], {_fmt(ix['beginTimestamp'])} .. {_fmt(ix['endTimestamp'])}"
        )
    if rep.checkpoint:
        lines += ["", "checkpoint: " + ", ".join(
            f"{k}={v if k == 'recoveryOffset' else _fmt(v)}" for k, v in rep.checkpoint.items()
        )]  # fmt: skip
    lines += ["", "problems:" if rep.problems else "no problems found"]
    lines += [f"  {p}" for p in rep.problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.store.inspect", description=__doc__)
    parser.add_argument("dir", help="store root (the directory holding commitlog/)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-crc", action="store_true", help="skip body CRC verification")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.dir, "commitlog")):
        print(f"{args.dir}: no commitlog/ directory; pass a store root", file=sys.stderr)
        return 2
    rep = inspect_store(args.dir, check_crc=not args.no_crc)
    print(json.dumps(asdict(rep), indent=2) if args.json else render(rep))
    return 1 if rep.problems else 0


if __name__ == "__main__":
    sys.exit(main())
