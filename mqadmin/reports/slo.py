"""Per-group time-lag SLOs: a small TOML file with a default and per-group thresholds.

The file (default ``$MQADMIN_HOME/report-slo.toml``)::

    default = "5m"          # time lag a group may have before its minutes count as breach

    [groups]
    orders-consumer = "30s"
    "%RETRY%billing" = "1h"

Durations are ``500ms``, ``30s``, ``5m``, ``2h`` or plain milliseconds.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

DEFAULT_SLO_MS = 5 * 60_000
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


class SloError(ValueError):
    """An SLO file that cannot be read."""


@dataclass(frozen=True, slots=True)
class Slo:
    """The threshold in milliseconds of time lag for each group, and the default."""

    default_ms: int = DEFAULT_SLO_MS
    groups: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def for_group(self, group: str) -> int:
        return self.groups.get(group, self.default_ms)


def parse_duration(value: object, where: str) -> int:
    """``30s`` -> 30000; an int is milliseconds.

    Raises:
        SloError: anything else, or a value of zero or less.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise SloError(f"{where}: cannot read the duration {value!r}: write e.g. 500ms, "
                           "30s, 5m or 2h")
        ms = round(float(match.group(1)) * _UNITS[match.group(2) or "ms"])
    if ms <= 0:
        raise SloError(f"{where}: the SLO must be above zero, not {value!r}")
    return ms


def load(path: Path | None) -> Slo:
    """The SLOs of `path`; the built-in default (5 min for every group) when `path` is None.

    Raises:
        SloError: the file is missing, not TOML, or has a bad value.
    """
    if path is None:
        return Slo()
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SloError(f"no SLO file {path}: create it (see docs/reports.md) or leave out "
                       "--slo to use the default of 5 min") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SloError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SloError(f"{path} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"default", "groups"}
    if unknown:
        raise SloError(f"{path}: unknown keys {sorted(unknown)}; only 'default' and a "
                       "[groups] table are read")
    default = parse_duration(doc["default"], f"{path}: default") if "default" in doc \
        else DEFAULT_SLO_MS
    groups = doc.get("groups", {})
    if not isinstance(groups, dict):
        raise SloError(f"{path}: 'groups' must be a table of group = \"duration\" lines")
    parsed = {str(name): parse_duration(value, f"{path}: groups.{name}")
              for name, value in groups.items()}
    return Slo(default, MappingProxyType(parsed))
