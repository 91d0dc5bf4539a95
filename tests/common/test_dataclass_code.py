"""The code `dataclasses` compiles for our classes is kept between processes
(engine.common.dataclass_code): a second process compiles none of it and gets the same
classes; a torn file is compiled anew; nothing is written where bytecode is not; the classes
of other code are not kept."""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Keeps the code in the file given, counts the compiles of dataclass methods and describes a
#: few of our classes as they behave.
PROBE = """
import builtins, dataclasses, json, pathlib, sys
import engine.common.dataclass_code as kept
kept._path = pathlib.Path(sys.argv[1])  # instead of beside the bytecode, before any class
compiles = 0
compile_ = builtins.compile
def counting(source, *args, **kwargs):
    global compiles
    compiles += isinstance(source, str) and source.startswith("def __create_fn__(")
    return compile_(source, *args, **kwargs)
builtins.compile = counting
from engine.protocol.header.broker import SendMessageRequestHeader as H
from engine.protocol.body.route import QueueData
if len(sys.argv) > 2:
    @dataclasses.dataclass(frozen=True)
    class Other:
        x: int
h = H("g", "t", "TBW102", 4, 0, 0, 1, 0)
try:
    h.topic = "u"
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(json.dumps({"compiles": compiles, "repr": repr(h), "eq": h == H("g", "t", "TBW102", 4,
    0, 0, 1, 0), "hash": hash(h) == hash(H("g", "t", "TBW102", 4, 0, 0, 1, 0)),
    "frozen": frozen, "init": H.__init__.__annotations__,
    "replace": repr(dataclasses.replace(h, topic="u")),
    "queue": repr(QueueData("b", 4, 4, 6, 0))}))
"""


def probe(path: Path, *args: str, **env: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(path), *args], capture_output=True,
                          text=True, check=True, env={**os.environ, **env})
    return json.loads(done.stdout)


def kept(path: Path) -> dict[bytes, object]:
    magic, entries = marshal.loads(path.read_bytes())
    assert magic == importlib.util.MAGIC_NUMBER
    return entries


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


def without_count(seen: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in seen.items() if k != "compiles"}


@pytest.mark.usefixtures("clean_env")
def test_a_second_process_compiles_nothing_and_gets_the_same_classes(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    first = probe(path)
    assert first["compiles"] >= 6 * 2  # six methods of each class at least
    second = probe(path)
    assert second["compiles"] == 0
    assert without_count(second) == without_count(first)
    assert first["frozen"] and first["eq"] and first["hash"]
    # __init__'s annotations are the fields' own, as `dataclasses` compiles them
    assert first["init"] == {"producer_group": "GroupName", "topic": "Topic",
                             "default_topic": "Topic", "default_topic_queue_nums": "Int32",
                             "queue_id": "QueueId", "sys_flag": "Int32",
                             "born_timestamp": "TimestampMs", "flag": "Int32",
                             "properties": "Properties | None",
                             "reconsume_times": "Int32 | None", "unit_mode": "bool",
                             "batch": "bool", "max_reconsume_times": "Int32 | None",
                             "bname": "BrokerName | None", "return": None}


@pytest.mark.usefixtures("clean_env")
def test_a_torn_file_is_compiled_anew_and_written_again(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    probe(path)
    whole = kept(path)
    path.write_bytes(path.read_bytes()[:1000])
    assert probe(path)["compiles"] > 0
    assert kept(path).keys() == whole.keys()
    assert probe(path)["compiles"] == 0


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    assert probe(path, PYTHONDONTWRITEBYTECODE="1")["compiles"] > 0
    assert not path.exists()


@pytest.mark.usefixtures("clean_env")
def test_the_classes_of_other_code_are_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    probe(path)
    ours = set(kept(path))
    probe(path, "other")  # makes a class in __main__ too
    assert set(kept(path)) == ours
