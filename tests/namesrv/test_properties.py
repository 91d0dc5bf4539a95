"""Java `.properties` parsing and writing, and the generic config loader."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.common import config as configlib
from engine.common import properties
from engine.common.config import ConfigError, config_key


def test_separators_comments_and_blanks() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d  =  4  \n"
        "e\n"
        "f=\n"
        "g=x=y:z\n"
    )
    assert properties.loads(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4  ", "e": "", "f": "", "g": "x=y:z",
    }


def test_escapes_continuations_and_line_endings() -> None:
    text = (
        "key\\ with\\:odd\\=chars = v\\tal\\u0041\\\\\r\n"
        "long = one, \\\n"
        "       two, \\\r"
        "       three\n"
        "# not continued \\\n"
        "after=1\n"
        "even=ends with backslash\\\\\n"
        "last=x"
    )
    assert properties.loads(text) == {
        "key with:odd=chars": "v\talA\\",
        "long": "one, two, three",
        "after": "1",
        "even": "ends with backslash\\",
        "last": "x",
    }


def test_repeated_key_keeps_the_last_value() -> None:
    assert properties.loads("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape() -> None:
    with pytest.raises(properties.PropertiesError):
        properties.loads("a=\\u12")


def test_dumps_round_trips() -> None:
    values = {"a key": " lead", "x": "tab\there=#!:\\", "uni": "é€"}
    text = properties.dumps(values.items())
    assert text.isascii()
    assert properties.loads(text) == values
    assert properties.dumps([("k", "a b=c")], escape=False) == "k=a b=c\n"


class Role(enum.Enum):
    ASYNC_MASTER = 1
    SLAVE = 2


@dataclass(frozen=True, slots=True)
class Sample:
    broker_name: str = "broker-a"
    listen_port: int = 10911
    ratio: float = 0.75
    auto_create_topic_enable: bool = True
    broker_role: Role = Role.ASYNC_MASTER
    maped_file_size_commit_log: int = config_key("mapedFileSizeCommitLog", 1 << 30)
    namesrv_addr: str | None = None


def test_load_converts_types_and_reports_unknown_keys() -> None:
    cfg, unknown = configlib.load(Sample, {
        "brokerName": "b", "listenPort": " 10 ", "ratio": "0.5", "autoCreateTopicEnable": "FALSE",
        "brokerRole": "SLAVE", "mapedFileSizeCommitLog": "4096", "namesrvAddr": "h:9876",
        "bogus": "1", "listen_port": "2",
    })
    assert cfg == Sample("b", 10, 0.5, False, Role.SLAVE, 4096, "h:9876")
    assert unknown == ["bogus", "listen_port"]
    again, _ = configlib.load(Sample, {"ratio": "1"}, base=cfg)
    assert again.broker_name == "b" and again.ratio == 1.0


@pytest.mark.parametrize(("key", "value"), [
    ("listenPort", "99x"), ("listenPort", "1_0"), ("ratio", "abc"),
    ("autoCreateTopicEnable", "yes"), ("brokerRole", "MASTER"),
])
def test_bad_values_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        configlib.load(Sample, {key: value})
    assert info.value.key == key and info.value.value == value
    assert key in str(info.value) and repr(value) in str(info.value)


def test_render_and_keys() -> None:
    cfg = Sample(namesrv_addr=None)
    text = configlib.render(cfg)
    assert text.splitlines() == [
        "brokerName=broker-a", "listenPort=10911", "ratio=0.75", "autoCreateTopicEnable=true",
        "brokerRole=ASYNC_MASTER", "mapedFileSizeCommitLog=1073741824",
    ]
    assert "namesrvAddr=null" in configlib.render(cfg, null="null")
    assert configlib.keys(Sample)[-2:] == ["mapedFileSizeCommitLog", "namesrvAddr"]
    back, unknown = configlib.load(Sample, properties.loads(text))
    assert back == cfg and unknown == []


def test_load_file_errors(tmp_path: Path) -> None:
    missing = f"{tmp_path}/nope.properties"
    with pytest.raises(ConfigError, match="cannot read config file"):
        configlib.load_file(Sample, missing)
