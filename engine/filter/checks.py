"""The operand rules RocketMQ 4.9.7 enforces while it builds an expression, and its literals."""

# How this works: each rule is one of the RuntimeExceptions thrown by the factory methods of
# ComparisonExpression, ConstantExpression and SelectorParser.asBooleanExpression; RocketMQ
# reports them as an invalid selector, so they are compile errors here too, with a message
# that says what to write instead.

from __future__ import annotations

from engine.filter.errors import FilterSemanticError, where
from engine.filter.javatypes import compare
from engine.filter.lexer import Token
from engine.filter.nodes import (
    LONG_MAX,
    BooleanCast,
    Literal,
    Node,
    Not,
    Property,
    depth,
    is_condition,
    render,
)

_DOUBLE_MIN = 5e-324  # Java's Double.MIN_VALUE, the smallest positive double


def _show(node: Node) -> str:
    """`node` as text for a message; a very deep one is not spelled out."""
    return render(node) if depth(node) <= 20 else "(the expression before it)"


def _error(message: str, text: str, tok: Token) -> FilterSemanticError:
    return FilterSemanticError(message, text=text, position=tok.start, token=tok.image)


def as_condition(node: Node, text: str, at: Token) -> Node:
    """A property used as a condition is cast; other non-conditions are refused."""
    if isinstance(node, Property):
        return BooleanCast(node)
    if not is_condition(node):
        raise _error(f"Expected a condition at {where(text, at.start)} but found the value "
                     f"{_show(node)}; a condition is e.g. a = 1, a IS NULL or TRUE", text, at)
    return node


def check_ordered(node: Node, text: str, op: Token) -> None:
    """Only numbers, properties and negations can meet >, >=, <, <= or BETWEEN."""
    if isinstance(node, Literal):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return
    elif not is_condition(node):
        return
    what = "a condition" if not isinstance(node, Literal) else "the value"
    hint = "strings and TRUE/FALSE only support = and <>"
    if isinstance(node, Not):
        hint = "NOT applies to the value right after it, so write NOT (a > 1)"
    raise _error(f'Cannot use {what} {_show(node)} with "{op.image}" at '
                 f"{where(text, op.start)}: only numbers and properties can be ordered; {hint}",
                 text, op)


def check_equal(left: Node, right: Node, text: str, op: Token) -> None:
    """NULL cannot be compared with = or <>; TRUE/FALSE = 'x' between literals is refused."""
    if (isinstance(left, Literal) and left.value is None) or (
            isinstance(right, Literal) and right.value is None):
        raise _error(f'Cannot compare with NULL using "{op.image}" at {where(text, op.start)}; '
                     "use IS NULL or IS NOT NULL", text, op)
    if isinstance(left, Literal) and isinstance(right, Literal) and isinstance(
            left.value, bool) and not isinstance(right.value, bool):
        raise _error(f"Cannot compare {_show(left)} with {_show(right)} at "
                     f"{where(text, op.start)}; TRUE and FALSE compare with a property or a "
                     "condition", text, op)


def check_between(operand: Node, low: Node, high: Node, text: str, op: Token) -> None:
    """Numeric operands, and literal bounds in order (low <= high)."""
    for node in (operand, low, high):
        check_ordered(node, text, op)
    literals = isinstance(low, Literal) and isinstance(high, Literal)
    if literals and compare(high.value, low.value) < 0:  # type: ignore[union-attr]
        raise _error(f"BETWEEN {_show(low)} AND {_show(high)} at {where(text, op.start)}: "
                     "the lower bound must come first", text, op)


def check_in(operand: Node, text: str, op: Token) -> Property:
    """IN and NOT IN test a property, nothing else."""
    if not isinstance(operand, Property):
        raise _error(f'"{op.image}" at {where(text, op.start)} needs a property name on its '
                     f"left, found {_show(operand)}", text, op)
    return operand


def integer_literal(tok: Token, text: str) -> int:
    """ConstantExpression.createFromDecimal: a Long, with an optional l/L suffix."""
    digits = tok.image.rstrip("lL")
    value = int(digits) if len(digits) <= 19 else LONG_MAX + 1
    if value > LONG_MAX:
        raise _error(f"Integer {tok.image} at {where(text, tok.start)} is out of range; the "
                     f"largest is {LONG_MAX}", text, tok)
    return value


def float_literal(tok: Token, text: str) -> float:
    """ConstantExpression.createFloat: finite and not below Double.MIN_VALUE (so not 0.0)."""
    value = float(tok.image)
    if value == float("inf"):
        raise _error(f"Number {tok.image} at {where(text, tok.start)} is too large for a "
                     "double", text, tok)
    if value < _DOUBLE_MIN:
        raise _error(f"Number {tok.image} at {where(text, tok.start)} is refused: RocketMQ "
                     "4.9.7 rejects decimal literals below 4.9E-324, so write 0 for zero",
                     text, tok)
    return value
