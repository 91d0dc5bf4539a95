"""The one error tree of `engine.filter`.

    FilterError                     base of every error raised by the SQL92 filter
     ├── FilterSyntaxError          an expression RocketMQ 4.9.7 refuses to compile; the message
     │    │                         names the line/column, what was found and what was expected
     │    └── FilterSemanticError   it parses, but an operand does not fit its operator
     │                              ('x' > 1, a BETWEEN 5 AND 1, 5 AND b, a = NULL, 0.0)
     └── FilterEvaluationError      a message on which RocketMQ's evaluator throws (a property
                                    that is not a number compared with a number); only
                                    `Sql92Filter.evaluate` raises it, `matches` answers False

A compile error's message is meant for the remark of a SUBSCRIPTION_PARSE_FAILED response:
one line, naming where the problem is and what would fix it.
"""

from __future__ import annotations


class FilterError(Exception):
    """Base of every error raised by `engine.filter`."""


class FilterSyntaxError(FilterError, ValueError):
    """An expression that does not compile; `column` and `line` are 1-based."""

    def __init__(self, message: str, *, text: str = "", position: int = 0,
                 token: str | None = None, expected: str = "") -> None:
        self.text = text
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        self.token = token
        self.expected = expected
        super().__init__(message)


class FilterSemanticError(FilterSyntaxError):
    """Operands that RocketMQ 4.9.7 rejects while building the expression."""


class FilterEvaluationError(FilterError):
    """RocketMQ's evaluator would throw on this message, so the whole filter does not match."""


def where(text: str, position: int) -> str:
    """`column 9`, or `line 2, column 3` when the expression spans lines."""
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    if "\n" not in text:
        return f"column {column}"
    return f"line {text.count(chr(10), 0, position) + 1}, column {column}"
