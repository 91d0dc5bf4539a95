"""kvConfig.json: atomic writes, stale snapshots skipped, unreadable files reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.namesrv.kvconfig import KVConfigError, KVConfigManager
from engine.protocol.body.route import KVTable


def test_persist_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "kvConfig.json"
    kv = KVConfigManager(str(path))
    kv.load()  # missing file: empty table
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put("NS", "k", "v")
    kv.persist()
    assert path.read_bytes() == (b'{"configTable":{"NS":{"k":"v"},'
                                 b'"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"}}}')
    assert not (tmp_path / "deep" / "kvConfig.json.tmp").exists()
    again = KVConfigManager(str(path))
    again.load()
    assert again.get("NS", "k") == "v"
    assert again.namespace("ORDER_TOPIC_CONFIG") == KVTable({"T": "broker-a:4"})
    assert again.namespace("nope") is None


def test_older_snapshot_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    kv = KVConfigManager(str(tmp_path / "kv.json"))
    kv.put("NS", "k", "old")
    old = kv.snapshot()
    kv.put("NS", "k", "new")
    new = kv.snapshot()
    kv.write(*new)
    kv.write(*old)
    assert b'"new"' in (tmp_path / "kv.json").read_bytes()


@pytest.mark.parametrize("content", [b"{not json", b'{"other":1}', b'{"configTable":[1]}'])
def test_unreadable_file_is_an_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "kv.json"
    path.write_bytes(content)
    with pytest.raises(KVConfigError, match=r"kv\.json"):
        KVConfigManager(str(path)).load()
