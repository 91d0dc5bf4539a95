"""The syntax tree of a compiled selector: frozen, slotted nodes and a renderer back to SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal as Lit
from typing import TypeAlias

# A literal's value.  Whole numbers keep RocketMQ's Java types implicitly: |n| < 2**31 is an
# Integer, anything larger a Long (literals are never negative before `Negate`).
Value: TypeAlias = str | int | float | bool | None
CompareOp: TypeAlias = Lit["=", "<>", ">", ">=", "<", "<="]
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value


@dataclass(frozen=True, slots=True)
class Property:
    name: str  # a message property, case-sensitive


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node  # unary minus; unary plus leaves no node


@dataclass(frozen=True, slots=True)
class BooleanCast:
    operand: Property  # a bare property used as a condition


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    negated: bool  # IS NOT NULL


@dataclass(frozen=True, slots=True)
class Between:
    operand: Node
    low: Node
    high: Node
    negated: bool  # NOT BETWEEN


@dataclass(frozen=True, slots=True)
class In:
    operand: Property
    values: tuple[str, ...]
    negated: bool  # NOT IN


Node: TypeAlias = (Literal | Property | Negate | BooleanCast | Not | And | Or | Compare | IsNull
                   | Between | In)
CONDITIONS = (BooleanCast, Not, And, Or, Compare, IsNull, Between, In)


def is_condition(node: Node) -> bool:
    """What RocketMQ calls a BooleanExpression: evaluates to TRUE, FALSE or NULL."""
    if isinstance(node, Literal):
        return node.value is None or isinstance(node.value, bool)
    return isinstance(node, CONDITIONS)


def children(node: Node) -> tuple[Node, ...]:
    """The operands of `node`, left to right."""
    match node:
        case Negate(operand=x) | BooleanCast(operand=x) | Not(operand=x) | IsNull(operand=x):
            return (x,)
        case And(left=a, right=b) | Or(left=a, right=b) | Compare(left=a, right=b):
            return (a, b)
        case Between(operand=x, low=lo, high=hi):
            return (x, lo, hi)
        case In(operand=x):
            return (x,)
    return ()


def chain(node: And | Or) -> list[Node]:
    """The operands of a left-leaning run of the same operator: ((a AND b) AND c) -> a, b, c."""
    kind = type(node)
    operands: list[Node] = []
    current: Node = node
    while type(current) is kind:
        assert isinstance(current, And | Or)
        operands.append(current.right)
        current = current.left
    operands.append(current)
    operands.reverse()
    return operands


def depth(node: Node) -> int:
    """How deep evaluation recurses: a run of the same AND/OR counts as one level."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(current, And | Or):
            stack.extend((x, level + 1) for x in chain(current))
        else:
            stack.extend((x, level + 1) for x in children(current))
    return deepest


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def render(node: Node) -> str:
    """The node as selector text, every operator parenthesised; compiles back to `node`."""
    match node:
        case Literal(value=None):
            return "NULL"
        case Literal(value=bool() as b):
            return "TRUE" if b else "FALSE"
        case Literal(value=str() as s):
            return quote(s)
        case Literal(value=v):
            return repr(v)
        case Property(name=name) | BooleanCast(operand=Property(name=name)):
            return name
        case Negate(operand=x):
            return f"(-{render(x)})"
        case Not(operand=x):
            return f"(NOT {render(x)})"
        case And() | Or():
            word = " AND " if isinstance(node, And) else " OR "
            return "(" + word.join(render(x) for x in chain(node)) + ")"
        case Compare(op=op, left=a, right=b):
            return f"({render(a)} {op} {render(b)})"
        case IsNull(operand=x, negated=neg):
            return f"({render(x)} IS {'NOT ' if neg else ''}NULL)"
        case Between(operand=x, low=lo, high=hi, negated=neg):
            word = "NOT BETWEEN" if neg else "BETWEEN"
            return f"({render(x)} {word} {render(lo)} AND {render(hi)})"
        case In(operand=x, values=values, negated=neg):
            listed = ", ".join(quote(v) for v in values)
            return f"({render(x)} {'NOT IN' if neg else 'IN'} ({listed}))"
    raise AssertionError(node)
