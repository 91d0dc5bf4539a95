"""JSON text as Java's fastjson writes and reads it, next to standard JSON.

How this works: RocketMQ's bodies are fastjson output, which is JSON except that map keys that
are not strings go unquoted: integers (`{0:"host:10911"}`) and even objects used as keys
(`{{"brokerName":"b","queueId":0,"topic":"T"}:5}`).  `dumps` writes either form; `loads`
reads both, first through orjson (fast, standard JSON) and falling back to a small lenient
parser only when the text is non-standard.  Non-string keys come back as `int` or as an
`ObjectKey` (a hashable, read-only view of the key object).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from engine.protocol.errors import BodyError


class ObjectKey(Mapping[str, Any]):
    """An object used as a map key (fastjson writes it unquoted); hashable and immutable."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items: tuple[tuple[str, Any], ...] = tuple(sorted(items.items()))

    def as_dict(self) -> dict[str, Any]:
        """The key object as a dict (quicker than `dict(key)`, which looks up each item)."""
        return dict(self._items)

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectKey):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"ObjectKey({dict(self._items)!r})"


# ---------------------------------------------------------------------------- writing


def _key_text(key: Any, standard: bool) -> str:
    if isinstance(key, str):
        return orjson.dumps(key).decode()
    if isinstance(key, bool):
        text = "true" if key else "false"
    elif isinstance(key, int):
        text = str(key)
    elif isinstance(key, Mapping):
        text = _write(key, standard, None, 0)
    else:
        raise TypeError(f"cannot write a map key of type {type(key).__name__}")
    return orjson.dumps(text).decode() if standard else text


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, str):
        return (1, key)
    if isinstance(key, int):
        return (0, key)
    return (2, _write(key, True, None, 0))


def _write(value: Any, standard: bool, indent: str | None, depth: int) -> str:
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        keys = sorted(value, key=_sort_key)
        items = [f"{_key_text(k, standard)}:{_write(value[k], standard, indent, depth + 1)}"
                 for k in keys]
        if indent is None:
            return "{" + ",".join(items) + "}"
        closing = "\n" + indent * depth
        if all(isinstance(k, str) for k in keys):
            inner = "\n" + indent * (depth + 1)
            return "{" + inner + ("," + inner).join(items) + closing + "}"
        # fastjson writes maps with non-string keys on one line, then breaks before '}'.
        return "{" + ",".join(items) + closing + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = sorted(value) if isinstance(value, (set, frozenset)) else value
        return "[" + ",".join(_write(v, standard, indent, depth + 1) for v in seq) + "]"
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        raise TypeError(f"cannot write a value of type {type(value).__name__}") from None


def dumps(value: Any, *, standard: bool = False, pretty: bool = False) -> str:
    """Write `value` as fastjson does.

    Args:
        value: dicts, lists, sets, strings, numbers, booleans and None; dict keys may be
            `str`, `int` or mappings (`ObjectKey`, dict-like key objects).
        standard: quote every key (standard JSON; object keys become a string holding
            their JSON, which Java's fastjson also accepts).
        pretty: TAB indentation as RocketMQ's config files use.
    """
    return _write(value, standard, "\t" if pretty else None, 0)


def dumpb(value: Any, *, standard: bool = False) -> bytes:
    """`dumps` as UTF-8 bytes, ready to be a command body."""
    return dumps(value, standard=standard).encode()


# ---------------------------------------------------------------------------- reading

_WS = " \t\r\n"
_NUMBER_CHARS = frozenset("+-0123456789.eE")
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    """Recursive-descent parser for JSON plus fastjson's unquoted number/object keys."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> BodyError:
        return BodyError(f"invalid JSON at character {self.pos}: {what}")

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self, depth: int = 0) -> Any:
        if depth > 200:
            raise self.fail("nesting too deep")
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        if ch == '"' or ch == "'":
            return self.string()
        if ch in _NUMBER_CHARS:
            return self.number()
        for word, lit in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return lit
        raise self.fail(f"unexpected {ch!r}")

    def string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        pos = start + 1
        text = self.text
        while True:
            end = text.find(quote, pos)
            if end < 0:
                raise self.fail("unterminated string")
            backslashes = 0
            while text[end - 1 - backslashes] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                break
            pos = end + 1
        self.pos = end + 1
        raw = text[start + 1 : end]
        if quote == "'":
            raw = raw.replace('"', '\\"').replace("\\'", "'")
        try:
            result: str = orjson.loads('"' + raw + '"')
        except orjson.JSONDecodeError:
            raise self.fail("bad string escape") from None
        return result

    def number(self) -> int | float:
        text, start = self.text, self.pos
        pos = start
        while pos < len(text) and text[pos] in _NUMBER_CHARS:
            pos += 1
        self.pos = pos
        token = text[start:pos]
        try:
            return int(token)
        except ValueError:
            try:
                return float(token)
            except ValueError:
                raise self.fail(f"bad number {token!r}") from None

    def key(self, depth: int) -> Any:
        self.skip_ws()
        ch = self.text[self.pos] if self.pos < len(self.text) else ""
        if ch == '"' or ch == "'":
            return self.string()
        if ch == "{":
            return ObjectKey(self.obj(depth))
        if ch and ch in _NUMBER_CHARS:
            return self.number()
        start = self.pos  # fastjson also reads bare identifiers as keys
        while self.pos < len(self.text) and (self.text[self.pos].isalnum()
                                             or self.text[self.pos] in "_$"):
            self.pos += 1
        if self.pos == start:
            raise self.fail("expected a key")
        return self.text[start : self.pos]

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        out: dict[Any, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            key = self.key(depth + 1)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value(depth + 1)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            raise self.fail("expected ',' or '}'")

    def arr(self, depth: int) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            raise self.fail("expected ',' or ']'")


def loads(text: str | bytes) -> Any:
    """Read standard JSON or fastjson's non-standard form.

    Raises:
        BodyError: the text is neither.
    """
    if isinstance(text, memoryview):
        text = bytes(text)
    # orjson reads an integer beyond 64 bits as a float (-9223372036854775809 became Java's
    # Long.MIN_VALUE, a valid offset): a text with a 19-digit run goes to the exact parser.
    if isinstance(text, str):
        exact = _LONG_DIGITS.search(text) is not None
    else:
        exact = _LONG_DIGITS_B.search(text) is not None
    if not exact:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode()
        except UnicodeDecodeError:
            raise BodyError("body is not UTF-8 text") from None
    quick = None if exact else _quoted_keys(text)
    if quick is not None:
        return quick
    parser = _Parser(text)
    result = parser.value()
    parser.skip_ws()
    if parser.pos != len(text):
        raise parser.fail("trailing characters")
    return result


_LONG_DIGITS = re.compile(r"\d{19}")
_LONG_DIGITS_B = re.compile(rb"\d{19}")
# A string, or (group 1) a key fastjson leaves unquoted: a flat object or a number.
_KEYS = re.compile(r'"(?:[^"\\]|\\.)*"|(?<=[{,])(\{(?:"(?:[^"\\]|\\.)*"|[^{}"])*\}|-?\d+)(?=:)',
                   re.DOTALL)
#: Marks a quoted key as an object key (NUL) or a number key (SOH): no topic, group or
#: field name starts with either.
_OBJECT_MARK, _NUMBER_MARK = "\x00", "\x01"


def _quoted_keys(text: str) -> Any | None:
    """fastjson's text read by orjson, its unquoted keys (flat objects, numbers: what
    brokers write, a consume-stats body's queues) quoted with a mark first and turned back
    into `ObjectKey` / int keys after; None when that does not make it JSON (nested object
    keys, single quotes, bare names: the parser reads those).  The parser alone took
    1.4 s of CPU for a broker's stats of 3,000 groups."""
    found = 0

    def quote(m: re.Match[str]) -> str:
        nonlocal found
        key = m.group(1)
        if key is None:
            return m.group(0)
        found += 1
        mark = _OBJECT_MARK if key[0] == "{" else _NUMBER_MARK
        return orjson.dumps(mark + key).decode()

    try:
        value = orjson.loads(_KEYS.sub(quote, text))
        if found:
            _restore_keys(value)
    except ValueError:  # a key object that is not JSON (single quotes, ...), or a string key
        return None     # of the text's own that starts with a mark: the parser reads those
    return value


def _restore_keys(value: Any) -> None:
    """Marked keys back to what the parser makes of them, in place, order kept."""
    if type(value) is list:
        for item in value:
            if type(item) is dict or type(item) is list:
                _restore_keys(item)
        return
    if type(value) is not dict:
        return
    marked = False
    for key, item in value.items():
        if key[:1] in (_OBJECT_MARK, _NUMBER_MARK):
            marked = True
        if type(item) is dict or type(item) is list:
            _restore_keys(item)
    if marked:
        items = list(value.items())
        value.clear()
        for key, item in items:
            value[_restored(key)] = item


def _restored(key: str) -> Any:
    if key[:1] == _OBJECT_MARK:
        return ObjectKey(orjson.loads(key[1:]))  # the pattern took a {...}: an object
    if key[:1] == _NUMBER_MARK:
        return int(key[1:])
    return key
