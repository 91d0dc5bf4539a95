"""RocketMQ's value comparison (ComparisonExpression.__compare) with Java's parsing rules."""

# How this works: message properties are strings; literals are Integer (|n| < 2**31), Long,
# Double, String or Boolean.  When a comparison meets two different types RocketMQ converts
# one side: a String next to a number is parsed with Integer.valueOf / Long.valueOf /
# Double.valueOf (whichever the number's type is), a String next to a Boolean with
# Boolean.valueOf.  A String that does not parse makes Java throw, and RocketMQ's broker
# then drops the message whatever the rest of the expression says: `FilterEvaluationError`.
# Types that cannot be converted compare as "less than" (-1), as in the Java code.

from __future__ import annotations

import math
import re
import unicodedata
from typing import TypeVar

from engine.filter.errors import FilterEvaluationError
from engine.filter.nodes import INT_MAX, LONG_MAX, Value

_ASCII_INT = re.compile(r"[+-]?[0-9]{1,18}")
_JAVA_INT = re.compile(r"[+-]?\d+")  # any Unicode decimal digit, like Character.digit
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:(?P<dec>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+))[fFdD]?)"
)


_T = TypeVar("_T", int, str, bool)


def parse_int(s: str, limit: int) -> int:
    """Integer.valueOf (limit INT_MAX) or Long.valueOf (LONG_MAX): no spaces, no underscores."""
    n = int(s if _ASCII_INT.fullmatch(s) else _plain_digits(s))
    if not -limit - 1 <= n <= limit:
        kind = "an Integer" if limit == INT_MAX else "a Long"
        raise FilterEvaluationError(f'"{s[:40]}" is out of range for {kind}')
    return n


def _plain_digits(s: str) -> str:
    """`s` as a short ASCII number string: Java reads any decimal digit, and leading zeros."""
    if _JAVA_INT.fullmatch(s) is None or any(ord(c) > 0xFFFF for c in s):
        raise FilterEvaluationError(f'"{s[:40]}" is not a whole number')
    digits = "".join(str(unicodedata.decimal(c)) for c in s.lstrip("+-")).lstrip("0") or "0"
    return ("-" if s[0] == "-" else "") + digits[:20]


def parse_double(s: str) -> float:
    """Double.valueOf: trims, accepts NaN, Infinity, hex floats and a f/F/d/D suffix."""
    t = s.strip("".join(map(chr, range(33))))
    m = _JAVA_DOUBLE.fullmatch(t)
    if m is None:
        raise FilterEvaluationError(f'"{s}" is not a number')
    body = t.rstrip("fFdD") if (m["dec"] or m["hex"]) else t
    if m["hex"]:
        try:
            return float.fromhex(body)
        except OverflowError:
            return -math.inf if body.startswith("-") else math.inf
    if body.lstrip("+-") == "NaN":
        return math.nan
    if body.lstrip("+-") == "Infinity":
        return -math.inf if body.startswith("-") else math.inf
    return float(body)


def parse_bool(s: str) -> bool:
    """Boolean.valueOf: "true" in any case, everything else is false."""
    return s.isascii() and s.lower() == "true"


def compare_double(a: float, b: float) -> int:
    """Double.compareTo: NaN equals itself and is above +Infinity; -0.0 is below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0:
        return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)
    return 0


def _sign(a: _T, b: _T) -> int:
    return (a > b) - (a < b)


def limit_for(n: int) -> int:
    """The range Java parses a string into next to `n`: Integer's, or Long's."""
    return INT_MAX if -INT_MAX <= n <= INT_MAX else LONG_MAX


def compare(lv: Value, rv: Value) -> int:
    """ComparisonExpression.__compare for two non-null values: <0, 0 or >0."""
    if isinstance(lv, bool):
        if isinstance(rv, bool):
            return _sign(lv, rv)
        if isinstance(rv, str):  # Java casts the Boolean itself to String
            raise FilterEvaluationError("a condition cannot be compared with a string")
        return -1
    if isinstance(rv, bool):
        return _sign(parse_bool(lv), rv) if isinstance(lv, str) else -1
    if isinstance(lv, float):
        if isinstance(rv, str):
            return compare_double(lv, parse_double(rv))
        return compare_double(lv, float(rv)) if rv is not None else -1
    if isinstance(rv, float):
        if isinstance(lv, str):
            return compare_double(parse_double(lv), rv)
        return compare_double(float(lv), rv) if lv is not None else -1
    if isinstance(lv, int):
        if isinstance(rv, int):
            return _sign(lv, rv)
        return _sign(lv, parse_int(rv, limit_for(lv))) if rv is not None else -1
    if isinstance(lv, str):
        if isinstance(rv, str):
            return _sign(lv, rv)
        if isinstance(rv, int):
            return _sign(parse_int(lv, limit_for(rv)), rv)
    return -1
