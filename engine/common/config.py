"""Filling frozen config dataclasses from RocketMQ-style properties, and rendering them back.

How this works: a config is a frozen dataclass whose every field has a default.  A field's
properties key is the camelCase of its name (`listen_port` -> `listenPort`, the same rule as
`engine.protocol.wire.camel`) unless `config_key("mapedFileSizeCommitLog", ...)` names it.
`load` converts each known key's text to the field's type (str, int, float, bool, an Enum by
name, or an optional of those) and returns the keys it did not know, so the caller can warn
about them instead of dropping them silently.  `render` writes a config back as
``key=value`` lines for ``-p`` and GET_*_CONFIG.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from engine.common import properties
from engine.protocol.wire import camel

T = TypeVar("T")

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?$")


class ConfigError(ValueError):
    """A config value that does not convert to its field's type (or an unreadable file)."""

    def __init__(self, message: str, key: str | None = None, value: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


def config_key(key: str, default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A config field whose properties key is not the camelCase of its Python name."""
    if default is not dataclasses.MISSING:
        kwargs["default"] = default
    return dataclasses.field(metadata={"config": key}, **kwargs)


def secret_key(key: str, default: Any = None) -> Any:
    """A config field holding a secret: `render`/`items` show it masked, never its value."""
    return dataclasses.field(default=default, repr=False, metadata={"config": key, "secret": True})


MASK = "******"


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    attr: str
    key: str
    hint: Any
    secret: bool = False


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = tuple(
            _Field(f.name, f.metadata.get("config", camel(f.name)), hints[f.name],
                   bool(f.metadata.get("secret")))
            for f in dataclasses.fields(cls)
        )
        _FIELDS[cls] = found
    return found


def keys(cls: type) -> list[str]:
    """The properties keys a config class understands, in declaration order."""
    return [f.key for f in _fields(cls)]


def _optional(hint: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def convert(hint: Any, key: str, raw: str) -> Any:
    """Convert one properties value to `hint`.

    Raises:
        ConfigError: the text is not a valid value of that type.
    """
    target, nullable = _optional(hint)
    text = raw.strip()
    if nullable and text in ("", "null"):
        return None
    if target is str:
        return raw
    if target is bool:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(f"config key '{key}': {raw!r} is not a boolean (true/false)", key, raw)
    if target is int:
        if _INT.match(text):
            return int(text)
        raise ConfigError(f"config key '{key}': {raw!r} is not an integer", key, raw)
    if target is float:
        if _FLOAT.match(text):
            return float(text.rstrip("fFdD"))
        raise ConfigError(f"config key '{key}': {raw!r} is not a number", key, raw)
    if isinstance(target, type) and issubclass(target, enum.Enum):
        member = target.__members__.get(text)
        if member is None:
            names = ", ".join(target.__members__)
            raise ConfigError(f"config key '{key}': {raw!r} is not one of {names}", key, raw)
        return member
    raise TypeError(f"config field for '{key}' has an unsupported type {target!r}")


def load(cls: type[T], props: Mapping[str, str], *, base: T | None = None) -> tuple[T, list[str]]:
    """Build a config of type `cls` from properties, starting from `base` or the defaults.

    Returns:
        The config and the keys of `props` that `cls` does not know, in input order.

    Raises:
        ConfigError: a known key holds a value that does not convert (names key and value).
    """
    by_key = {f.key: f for f in _fields(cls)}
    changes: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in props.items():
        field = by_key.get(key)
        if field is None:
            unknown.append(key)
        else:
            changes[field.attr] = convert(field.hint, key, raw)
    if base is None:
        return cls(**changes), unknown
    return dataclasses.replace(base, **changes), unknown  # type: ignore[type-var]


def load_file(cls: type[T], path: str, *, base: T | None = None) -> tuple[T, list[str]]:
    """`load` from a properties file (UTF-8).

    Raises:
        ConfigError: the file cannot be read or parsed, or a value does not convert.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # Java's Properties.load(InputStream) reads ISO-8859-1
        text = data.decode("latin-1")
    try:
        props = properties.loads(text)
    except properties.PropertiesError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    return load(cls, props, base=base)


def value_text(value: Any) -> str | None:
    """A config value as RocketMQ prints it (booleans lower-case, enums by name)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def items(config: Any) -> list[tuple[str, str | None]]:
    """The config's keys and value texts in declaration order (None for unset optionals)."""
    return [(f.key, MASK if f.secret and getattr(config, f.attr) is not None
             else value_text(getattr(config, f.attr))) for f in _fields(type(config))]


def render(config: Any, *, escape: bool = False, null: str | None = None) -> str:
    """Write the config as ``key=value`` lines.

    Args:
        config: a config dataclass.
        escape: escape keys and values as `Properties.store` does.
        null: text for unset optionals; None leaves them out (as `properties2String` does).
    """
    pairs = [(k, v if v is not None else null) for k, v in items(config)]
    return properties.dumps(((k, v) for k, v in pairs if v is not None), escape=escape)
