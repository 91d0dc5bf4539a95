"""Recovery: clean restarts, crash images, a torn or corrupt last record at every byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.store import GetMessageStatus, MessageStore
from engine.store.checkpoint import StoreCheckpoint
from engine.store.errors import StoreLoadError
from tests.store.helpers import msg

N = 12


def _records(s: MessageStore, topic: str = "TopicTest", queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        r = s.get_message("g", topic, queue_id, offset, 32)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out.extend(r.messages)
        offset = r.next_begin_offset


def _checkpoint_before(root: Path, offset: int) -> None:
    """Make the store's last checkpoint precede `offset`: what follows was written after
    it, so recovery verifies it (records before the checkpoint are trusted)."""
    cp = StoreCheckpoint(str(root / "checkpoint"))
    cp.lower(offset)
    cp.close()


def _crash_image(src: Path, dst: Path) -> None:
    """What a SIGKILL leaves: the files as they are, abort marker included."""
    shutil.copytree(src, dst)


class _Image:
    """A store directory's files, kept in memory and written back over one working copy
    per case: each case starts from the same bytes, without a copy and removal of a whole
    tree every time (the cases outnumber the bytes they differ in)."""

    def __init__(self, base: Path) -> None:
        self.files = {p.relative_to(base): p.read_bytes() for p in base.rglob("*") if p.is_file()}

    def restore(self, root: Path) -> None:
        """Make `root` hold exactly the image's files (what a case added is removed)."""
        if root.exists():
            for p in sorted(root.rglob("*"), reverse=True):  # files before their directories
                rel = p.relative_to(root)
                if p.is_dir():
                    if not any(f.parts[: len(rel.parts)] == rel.parts for f in self.files):
                        p.rmdir()
                elif rel not in self.files:
                    p.unlink()
        for rel, data in self.files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)


async def _written_store(make_store: Callable[..., MessageStore], root: Path) -> list[bytes]:
    s = make_store(root)
    await s.start()
    for i in range(N):
        assert (await s.put_message(msg(i, size=60 + 17 * i))).ok
    recs = _records(s)
    await s.shutdown()
    return recs


async def test_clean_restart_keeps_everything(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    recs = await _written_store(make_store, tmp_path / "a")
    s = make_store(tmp_path / "a")
    assert s.last_exit_ok and s.recovery_report is not None
    assert not s.recovery_report.abnormal
    assert _records(s) == recs
    await s.start()
    r = await s.put_message(msg(N))
    assert r.queue_offset == N
    await s.shutdown()


async def test_crash_image_rebuilds_queues_and_index(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "live")
    await s.start()
    for i in range(40):
        await s.put_message(msg(i, queue_id=i % 2))
    expected = _records(s, queue_id=1)
    _crash_image(tmp_path / "live", tmp_path / "img")
    await s.shutdown()
    shutil.rmtree(tmp_path / "img" / "consumequeue")
    shutil.rmtree(tmp_path / "img" / "index")
    c = make_store(tmp_path / "img")
    assert not c.last_exit_ok
    assert c.recovery_report is not None and c.recovery_report.redispatched == 40
    assert _records(c, queue_id=1) == expected
    assert c.get_max_offset_in_queue("TopicTest", 0) == 20
    assert len(c.query_message("TopicTest", "key33", 32, 0, 2**62).messages) == 1
    await c.start()
    assert (await c.put_message(msg(99, queue_id=1))).queue_offset == 20
    await c.shutdown()


def _last_record(s: MessageStore) -> tuple[int, int]:
    cq = s.queues.find("TopicTest", 0)
    assert cq is not None
    entry = cq.get_entry(cq.max_offset - 1)
    assert entry is not None
    return entry[0], entry[1]


@pytest.mark.parametrize("mode", ["truncate", "flip"])
async def test_torn_or_corrupt_last_record_at_every_byte(
    make_store: Callable[..., MessageStore], tmp_path: Path, mode: str
) -> None:
    base = tmp_path / "base"
    recs = await _written_store(make_store, base)
    probe = make_store(base)
    phys, size = _last_record(probe)
    seg_size = probe.config.mapped_file_size_commit_log
    probe.close()
    _checkpoint_before(base, phys)
    seg = base / "commitlog" / f"{phys - phys % seg_size:020d}"
    rel = phys % seg_size
    body_start = 88  # IPv4 hosts: the body follows the 88-byte head
    positions = range(size) if mode == "truncate" else range(body_start, body_start + 60)
    image, root = _Image(base), tmp_path / mode
    for k in positions:
        image.restore(root)
        target = root / "commitlog" / seg.name
        if mode == "truncate":
            os.truncate(target, rel + k)
        else:
            with open(target, "r+b") as f:
                f.seek(rel + k)
                b = f.read(1)
                f.seek(rel + k)
                f.write(bytes([b[0] ^ 0x5A]))
        if k % 2:
            (root / "abort").touch()  # crash path too
        s = make_store(root)
        assert s.get_max_phy_offset() == phys, k
        assert _records(s) == recs[:-1], k
        await s.start()
        r = await s.put_message(msg(100 + k))
        assert r.ok and r.wrote_offset == phys and r.queue_offset == N - 1
        await s.shutdown()
        s = make_store(root)
        assert _records(s)[:-1] == recs[:-1] and len(_records(s)) == N
        s.close()


async def test_wrong_segment_size_is_refused(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store(tmp_path / "a")
    await s.start()
    for i in range(40):
        await s.put_message(msg(i))
    await s.shutdown()
    with pytest.raises(StoreLoadError, match="segment size"):
        make_store(tmp_path / "a", mapped_file_size_commit_log=8192)


async def test_empty_commit_log_resets_queues(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    await _written_store(make_store, tmp_path / "a")
    shutil.rmtree(tmp_path / "a" / "commitlog")
    s = make_store(tmp_path / "a")
    assert s.get_max_offset_in_queue("TopicTest", 0) == 0
    assert s.get_max_phy_offset() == 0
    s.close()


def test_store_dir_is_locked_against_a_second_process(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    root = tmp_path / "locked"
    root.mkdir()
    code = (
        "import sys; from engine.store.checkpoint import lock_store_dir; "
        f"lock_store_dir({str(root / 'lock')!r}); print('locked', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLoadError, match="locked by another process"):
            make_store(root)
    finally:
        proc.communicate("", timeout=30)
    s = make_store(root)  # the lock went with the process
    s.close()


async def test_any_flipped_byte_of_the_last_record_keeps_the_rest(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    """Fields outside the CRC (queue id, flag, hosts...) may change undetected, as in
    RocketMQ; whatever happens, earlier records survive and the store stays writable."""
    base = tmp_path / "base"
    recs = await _written_store(make_store, base)
    probe = make_store(base)
    phys, size = _last_record(probe)
    seg_size = probe.config.mapped_file_size_commit_log
    probe.close()
    _checkpoint_before(base, phys)
    rel = phys % seg_size
    seg_name = f"{phys - rel:020d}"
    dropped = 0
    image, root = _Image(base), tmp_path / "x"
    for k in range(size):
        image.restore(root)
        with open(root / "commitlog" / seg_name, "r+b") as f:
            f.seek(rel + k)
            b = f.read(1)
            f.seek(rel + k)
            f.write(bytes([b[0] ^ 0xFF]))
        (root / "abort").touch()
        shutil.rmtree(root / "consumequeue")  # crashed before the entry was written
        s = make_store(root)
        end = s.get_max_phy_offset()
        assert end in (phys, phys + size), k
        dropped += end == phys
        assert _records(s)[: N - 1] == recs[:-1], k
        s.close()
    assert dropped > size // 2  # sizes, magic, lengths, body, topic, properties: detected
