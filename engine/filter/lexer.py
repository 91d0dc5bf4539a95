"""Tokens of the SQL92 selector language, read one at a time on demand."""

# How this works: the tokens are those of RocketMQ 4.9.7's SelectorParser.jj, matched the way
# JavaCC does (longest match; a keyword beats an identifier of the same length; keywords are
# case-insensitive).  Tokens are read only when the parser asks for one, because RocketMQ
# stops reading after the first token that cannot continue the expression: a character that
# is no token is only an error when the parser gets that far.

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from engine.filter.errors import FilterSyntaxError, where


class Kind(enum.Enum):
    """Token kinds; keyword kinds are named after their (upper-case) spelling."""

    NOT = "NOT"
    AND = "AND"
    OR = "OR"
    BETWEEN = "BETWEEN"
    IN = "IN"
    TRUE = "TRUE"
    FALSE = "FALSE"
    NULL = "NULL"
    IS = "IS"
    DECIMAL = "integer"
    FLOAT = "decimal number"
    STRING = "string"
    ID = "property name"
    EQ = "="
    NE = "<>"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    LPAREN = "("
    RPAREN = ")"
    COMMA = ","
    PLUS = "+"
    MINUS = "-"
    EOF = "end of expression"


KEYWORDS = {k.value: k for k in (Kind.NOT, Kind.AND, Kind.OR, Kind.BETWEEN, Kind.IN,
                                  Kind.TRUE, Kind.FALSE, Kind.NULL, Kind.IS)}


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    image: str  # the source text of the token, as typed
    start: int  # offset of its first character in the expression

    def describe(self) -> str:
        """How an error message names this token."""
        return "end of expression" if self.kind is Kind.EOF else f'"{self.image}"'


_WHITESPACE = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")  # needs its line end, as in 4.9.7
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_PUNCT = {"=": Kind.EQ, "<>": Kind.NE, ">": Kind.GT, ">=": Kind.GE, "<": Kind.LT,
          "<=": Kind.LE, "(": Kind.LPAREN, ")": Kind.RPAREN, ",": Kind.COMMA, "+": Kind.PLUS,
          "-": Kind.MINUS}
_HINTS = {
    "!": 'use "<>" for not-equal and NOT for negation',
    "&": "use AND",
    "|": "use OR",
    '"': "strings are quoted with single quotes: 'text'",
    ".": 'property names may only contain letters, digits, "_" and "$"',
}


class Lexer:
    """Reads the tokens of `text` one call to `next()` at a time."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def next(self) -> Token:
        """The next token; `Kind.EOF` at the end, again and again."""
        text = self.text
        pos = self._skip(self.pos)
        if pos >= len(text):
            self.pos = pos
            return Token(Kind.EOF, "", pos)
        ch = text[pos]
        if ch.isascii() and (ch.isalpha() or ch in "_$"):
            m = _ID.match(text, pos)
            assert m is not None
            kind = KEYWORDS.get(m.group().upper(), Kind.ID)
        elif ch.isascii() and (ch.isdigit() or ch == "."):
            m = _longest(_FLOAT.match(text, pos), _DECIMAL.match(text, pos))
            if m is None:
                raise self._unexpected(pos)
            kind = Kind.FLOAT if m.re is _FLOAT else Kind.DECIMAL
        elif ch == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise FilterSyntaxError(
                    f"Unterminated string starting at {where(text, pos)}; close it with ' "
                    "(write '' for a quote inside a string)",
                    text=text, position=pos, token="'", expected="'")
            kind = Kind.STRING
        else:
            two = text[pos:pos + 2]
            image = two if two in _PUNCT else ch
            if image not in _PUNCT:
                raise self._unexpected(pos)
            self.pos = pos + len(image)
            return Token(_PUNCT[image], image, pos)
        self.pos = m.end()
        return Token(kind, m.group(), pos)

    def _skip(self, pos: int) -> int:
        """Past whitespace and comments."""
        text = self.text
        while pos < len(text):
            ch = text[pos]
            if ch in _WHITESPACE:
                pos += 1
                continue
            m = None
            if ch == "-":
                m = _LINE_COMMENT.match(text, pos)
            elif ch == "/":
                m = _BLOCK_COMMENT.match(text, pos)
            if m is None:
                break
            pos = m.end()
        return pos

    def _unexpected(self, pos: int) -> FilterSyntaxError:
        text = self.text
        ch = text[pos]
        shown = "!=" if text.startswith("!=", pos) else ch
        hint = _HINTS.get(ch, "")
        if ch == "/":
            hint = "a /* comment */ must be closed"
        quoted = f"'{shown}'" if shown == '"' else f'"{shown}"'
        message = f"Unexpected character {quoted} at {where(text, pos)}"
        return FilterSyntaxError(message + (f"; {hint}" if hint else ""),
                                 text=text, position=pos, token=shown, expected=hint)


def _longest(a: re.Match[str] | None, b: re.Match[str] | None) -> re.Match[str] | None:
    if a is None or (b is not None and b.end() > a.end()):
        return b
    return a
