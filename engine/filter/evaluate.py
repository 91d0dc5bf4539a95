"""Turns a syntax tree into a Python closure that evaluates it, with RocketMQ's semantics."""

# How this works: every node becomes a function from the message properties to TRUE, FALSE,
# None (SQL's unknown) or a value, built once per filter so a message costs one call chain.
# The rules, each from the RocketMQ 4.9.7 class named:
#   * a property is its string, or None when absent (PropertyExpression, the broker's
#     MessageEvaluationContext);
#   * AND / OR are three-valued and short-circuit left to right (LogicExpression); a run
#     a AND b AND c is one loop, which keeps that order; NOT of unknown is unknown
#     (UnaryExpression.createNOT);
#   * a bare property used as a condition is unknown when absent, else FALSE: a property is
#     a string, never a Boolean (UnaryExpression.createBooleanCast);
#   * `x = y` is unknown when x is absent but FALSE when only y is (ComparisonExpression's
#     doCreateEqual), `<>` is NOT of `=`; >, >=, <, <= are unknown when either side is absent
#     and read two strings as doubles; BETWEEN is `>= AND <=`, NOT BETWEEN `< OR >`;
#   * IN is unknown for an absent property (UnaryExpression.createInExpression);
#   * unary minus of anything but a number is unknown (UnaryExpression.createNegate).
# Where Java throws (a string that is not a number compared with a number, a condition
# compared with a string), `FilterEvaluationError` propagates to the top, as the exception
# does to ExpressionMessageFilter, which then drops the message whatever the rest of the
# expression would have said.

from __future__ import annotations

from collections.abc import Callable, Mapping

from engine.filter.javatypes import compare, compare_double, limit_for, parse_double, parse_int
from engine.filter.nodes import (
    And,
    Between,
    BooleanCast,
    Compare,
    In,
    IsNull,
    Literal,
    Negate,
    Node,
    Not,
    Or,
    Property,
    Value,
    chain,
)

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], Value]

_HOLDS: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def build(node: Node) -> Evaluator:
    """The evaluator of `node`; it may raise `FilterEvaluationError` where RocketMQ throws."""
    match node:
        case Literal(value=value):
            return lambda props: value
        case Property(name=name):
            return lambda props: props.get(name)
        case Negate(operand=operand):
            return _negate(build(operand))
        case BooleanCast(operand=Property(name=name)):
            return lambda props: None if props.get(name) is None else False
        case Not(operand=operand):
            return _not(build(operand))
        case And():
            return _and(*[build(x) for x in chain(node)])
        case Or():
            return _or(*[build(x) for x in chain(node)])
        case Compare(op=op, left=Property(name=name), right=Literal(value=value)) if (
                value is not None and not isinstance(value, bool)):
            return _property_vs_literal(op, name, value)
        case Compare(op="=", left=left, right=right):
            return _equal(build(left), build(right))
        case Compare(op="<>", left=left, right=right):
            return _not(_equal(build(left), build(right)))
        case Compare(op=op, left=left, right=right):
            return _ordered(_HOLDS[op], build(left), build(right))
        case IsNull(operand=operand, negated=negated):
            get = build(operand)
            if negated:
                return lambda props: get(props) is not None
            return lambda props: get(props) is None
        case Between(operand=x, low=low, high=high, negated=False):
            return _and(build(Compare(">=", x, low)), build(Compare("<=", x, high)))
        case Between(operand=x, low=low, high=high, negated=True):
            return _or(build(Compare("<", x, low)), build(Compare(">", x, high)))
        case In(operand=Property(name=name), values=values, negated=negated):
            return _in(name, frozenset(values), negated)
    raise AssertionError(node)


def _negate(get: Evaluator) -> Evaluator:
    def negate(props: Properties) -> Value:
        v = get(props)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return -v
        return None
    return negate


def _not(get: Evaluator) -> Evaluator:
    def not_(props: Properties) -> Value:
        v = get(props)
        return None if v is None else not v
    return not_


def _and(*operands: Evaluator) -> Evaluator:
    """((a AND b) AND c) as one loop: the same order, short-circuits and unknowns."""
    def and_(props: Properties) -> Value:
        unknown = False
        for operand in operands:
            v = operand(props)
            if v is False:
                return False
            unknown = unknown or v is None
        return None if unknown else True
    return and_


def _or(*operands: Evaluator) -> Evaluator:
    def or_(props: Properties) -> Value:
        unknown = False
        for operand in operands:
            v = operand(props)
            if v is True:
                return True
            unknown = unknown or v is None
        return None if unknown else False
    return or_


def _equal(left: Evaluator, right: Evaluator) -> Evaluator:
    def equal(props: Properties) -> Value:
        lv = left(props)
        rv = right(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        kind = type(lv)
        if kind is type(rv) and kind is not float:  # same Java class: equals() decides
            return lv == rv
        return compare(lv, rv) == 0
    return equal


def _ordered(holds: Callable[[int], bool], left: Evaluator, right: Evaluator) -> Evaluator:
    def ordered(props: Properties) -> Value:
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            return holds(compare_double(parse_double(lv), parse_double(rv)))
        return holds(compare(lv, rv))
    return ordered


def _property_vs_literal(op: str, name: str, literal: str | int | float) -> Evaluator:
    """The common `region = 'eu'` and `price > 10`, with the string conversion chosen once."""
    holds = _HOLDS[op]
    if isinstance(literal, str):  # the parser lets strings meet = and <> only
        if op == "=":
            return lambda props: None if (v := props.get(name)) is None else v == literal
        assert op == "<>", op
        return lambda props: None if (v := props.get(name)) is None else v != literal
    if isinstance(literal, int):
        limit = limit_for(literal)

        def compare_int(props: Properties) -> Value:
            v = props.get(name)
            if v is None:
                return None
            n = parse_int(v, limit)
            return holds((n > literal) - (n < literal))
        return compare_int

    def compare_float(props: Properties) -> Value:
        v = props.get(name)
        return None if v is None else holds(compare_double(parse_double(v), literal))
    return compare_float


def _in(name: str, values: frozenset[str], negated: bool) -> Evaluator:
    def in_(props: Properties) -> Value:
        v = props.get(name)
        if v is None:
            return None
        return (v in values) != negated
    return in_
