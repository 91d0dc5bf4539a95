"""Epoch fencing on the name server, the epoch history format and the role file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.ha.errors import RoleFileError
from engine.ha.role_file import RoleRecord, load_role, save_role
from engine.namesrv.epochs import EpochTable, Verdict
from engine.protocol.errors import HeaderError
from engine.protocol.header.ha import decode_epochs, encode_epochs, truncate_offset_after

LIVE = {"a:1", "b:1"}


def check(table: EpochTable, addr: str, broker_id: int, epoch: int,
          history: dict[int, int] | None = None, used: tuple[int, ...] = (),
          live: set[str] = LIVE) -> Verdict:
    return table.check("broker-a", addr, broker_id, epoch, history or {}, used,
                       lambda a: a in live)


def test_epoch_history_text_round_trips() -> None:
    assert encode_epochs({2: 100, 1: 0}) == "1:0;2:100"
    assert decode_epochs("1:0;2:100") == {1: 0, 2: 100}
    assert decode_epochs("") == {} and decode_epochs(None) == {}
    with pytest.raises(HeaderError):
        decode_epochs("1-0")
    assert truncate_offset_after({1: 500, 2: 300, 3: 900}, 1) == 300
    assert truncate_offset_after({1: 500}, 1) is None


def test_higher_epochs_win_and_stale_masters_are_fenced() -> None:
    table = EpochTable()
    assert not check(table, "a:1", 0, 0).fenced  # the first master
    assert not check(table, "a:1", 0, 0).fenced  # registering again
    assert not check(table, "b:1", 1, 0).fenced  # its slave
    promoted = check(table, "b:1", 0, 1, {1: 4096})
    assert not promoted.fenced and promoted.history == {1: 4096}
    stale = check(table, "a:1", 0, 0, used=(0,))
    assert stale.fenced and stale.master_addr == "b:1" and stale.epoch == 1
    assert stale.truncate_offset == 4096 and stale.slave_id == 1
    assert not check(table, "a:1", 1, 0).fenced  # as a slave it is welcome
    assert check(table, "a:1", 1, 0).epoch == 1


def test_same_epoch_from_another_address_needs_the_owner_gone() -> None:
    table = EpochTable()
    check(table, "a:1", 0, 3)
    assert check(table, "c:1", 0, 3, used=(0, 1)).fenced  # a second master, same epoch
    assert check(table, "c:1", 0, 3, used=(0, 1)).slave_id == 2
    assert not check(table, "c:1", 0, 3, live={"b:1"}).fenced  # the owner is gone: replaced


def test_a_slave_that_saw_a_newer_epoch_protects_a_restarted_name_server() -> None:
    table = EpochTable()  # a fresh name server: the slave of epoch 2 registers first
    assert not check(table, "b:1", 1, 2, {1: 0, 2: 800}).fenced
    stale = check(table, "a:1", 0, 1)
    assert stale.fenced and stale.truncate_offset == 800
    assert not check(table, "c:1", 0, 2).fenced  # the real master of epoch 2


def test_role_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "haRole.json")
    assert load_role(path) is None
    record = RoleRecord("SLAVE", 2, 3, 4096, {1: 0, 3: 4096})
    save_role(path, record)
    assert load_role(path) == record
    Path(path).write_text('{"brokerRole": "SLAVE"}')
    with pytest.raises(RoleFileError, match="not an HA role record"):
        load_role(path)
    Path(path).write_text("{")
    with pytest.raises(RoleFileError, match="cannot read"):
        load_role(path)
