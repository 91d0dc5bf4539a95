"""Java `.properties` text: parsing as `Properties.load` does and writing it back.

How this works: `Properties.load` reads *natural* lines (ended by ``\\n``, ``\\r`` or
``\\r\\n``), joins a line ending in an odd number of backslashes with the next one (whose
leading blanks are dropped), skips blank lines and comment lines (first non-blank character
``#`` or ``!``), then splits each logical line into a key and a value: the key ends at the
first unescaped ``=``, ``:`` or blank; blanks, then one optional ``=``/``:``, then blanks are
skipped; the rest is the value.  Escapes ``\\t \\n \\r \\f \\uXXXX`` are decoded, any other
escaped character stands for itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_BLANKS = " \t\f"
_NEWLINES = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """The text is not valid properties syntax (a malformed ``\\uXXXX`` escape)."""


def _logical_lines(text: str) -> Iterable[str]:
    pending: str | None = None
    for natural in _NEWLINES.split(text):
        line = natural.lstrip(_BLANKS)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch != "\\" or i >= len(text):
            if ch != "\\":
                out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i : i + 4]
            if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANKS:
            break
        i += 1
    key = line[: min(i, n)]
    j = i
    while j < n and line[j] in _BLANKS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANKS:
            j += 1
    return _unescape(key), _unescape(line[j:])


def loads(text: str) -> dict[str, str]:
    """Parse properties text; a repeated key keeps its last value (as `Properties` does).

    Raises:
        PropertiesError: a malformed ``\\uXXXX`` escape.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        result[key] = value
    return result


def _escape(text: str, is_key: bool) -> str:
    out: list[str] = []
    for index, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch in "=:#!\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def dumps(items: Iterable[tuple[str, str]], *, escape: bool = True) -> str:
    """Write ``key=value`` lines.

    Args:
        items: keys and values in the order to write them.
        escape: escape as `Properties.store` does (so `loads` reads the same values back);
            False writes them raw, as RocketMQ's `MixAll.properties2String` does for
            GET_NAMESRV_CONFIG / GET_BROKER_CONFIG bodies.
    """
    if escape:
        return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in items)
    return "".join(f"{k}={v}\n" for k, v in items)
