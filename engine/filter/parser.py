"""Recursive descent over the SQL92 selector grammar of RocketMQ 4.9.7, producing nodes."""

# How this works: one method per rule of SelectorParser.jj, lowest precedence first:
#
#     selector    := or_expr                       (must be a condition)
#     or_expr     := and_expr (OR and_expr)*
#     and_expr    := equality (AND equality)*
#     equality    := comparison ( "=" comparison | "<>" comparison | IS [NOT] NULL )*
#     comparison  := unary ( (">"|">="|"<"|"<=") unary | [NOT] BETWEEN unary AND unary
#                          | [NOT] IN "(" string ("," string)* ")" )*
#     unary       := "+" unary | "-" unary | NOT unary | primary
#     primary     := literal | property | "(" or_expr ")"
#
# NOT binds tighter than any comparison, so `NOT a = 'x'` is `(NOT a) = 'x'`, exactly as in
# RocketMQ.  Like RocketMQ, parsing stops at the first token that cannot continue the
# expression, and the rest of the text is not read: `Parsed.rest` says where that was.

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.filter import checks
from engine.filter.errors import FilterSyntaxError, where
from engine.filter.lexer import Kind, Lexer, Token
from engine.filter.nodes import (
    And,
    Between,
    Compare,
    CompareOp,
    In,
    IsNull,
    Literal,
    Negate,
    Node,
    Not,
    Or,
    Property,
    depth,
)

MAX_NESTING = 100  # parentheses, NOT, + and - inside one another
MAX_DEPTH = 200  # levels of the tree, a run of AND (or OR) counting as one
_VALUE = "a value (a property name, 'string', number, TRUE, FALSE, NULL or \"(\")"
_ORDERING: dict[Kind, CompareOp] = {Kind.GT: ">", Kind.GE: ">=", Kind.LT: "<", Kind.LE: "<="}
_COMPARISON_LOOP = frozenset((Kind.NOT, Kind.BETWEEN, Kind.IN, *_ORDERING))
_EQUALITY_LOOP = frozenset((Kind.EQ, Kind.NE, Kind.IS))


@dataclass(frozen=True, slots=True)
class Parsed:
    node: Node
    rest: int | None  # offset of the first token not read, None when all text was used


def parse(text: str) -> Parsed:
    """Parse a whole selector.

    Raises:
        FilterSyntaxError: the text is not a selector RocketMQ 4.9.7 compiles.
    """
    return _Parser(text).selector()


class _Parser:
    __slots__ = ("ahead", "lexer", "nesting", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = Lexer(text)
        self.ahead: deque[Token] = deque()
        self.nesting = 0

    # -- tokens ---------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        while len(self.ahead) <= k:
            self.ahead.append(self.lexer.next())
        return self.ahead[k]

    def take(self) -> Token:
        tok = self.peek()
        self.ahead.popleft()
        return tok

    def expect(self, kind: Kind, expected: str) -> Token:
        if self.peek().kind is not kind:
            raise self.error(self.peek(), expected)
        return self.take()

    def error(self, tok: Token, expected: str) -> FilterSyntaxError:
        at = where(self.text, tok.start)
        message = f"Encountered {tok.describe()} at {at}; expected {expected}"
        return FilterSyntaxError(message, text=self.text, position=tok.start,
                                 token=None if tok.kind is Kind.EOF else tok.image,
                                 expected=expected)

    # -- rules ----------------------------------------------------------------------------

    def selector(self) -> Parsed:
        first = self.peek()
        if first.kind is Kind.EOF:
            raise FilterSyntaxError("The expression is empty; write a condition such as "
                                    "region = 'eu' AND price > 10",
                                    text=self.text, position=first.start, expected="a condition")
        node = checks.as_condition(self.or_expr(), self.text, first)
        if depth(node) > MAX_DEPTH:
            raise FilterSyntaxError(f"The expression is more than {MAX_DEPTH} levels deep; "
                                    "simplify it", text=self.text, position=first.start)
        last = self.peek()
        return Parsed(node, None if last.kind is Kind.EOF else last.start)

    def or_expr(self) -> Node:
        first = self.peek()
        left = self.and_expr()
        while self.peek().kind is Kind.OR:
            self.take()
            right_first = self.peek()
            right = self.and_expr()
            left = Or(checks.as_condition(left, self.text, first),
                      checks.as_condition(right, self.text, right_first))
        return left

    def and_expr(self) -> Node:
        first = self.peek()
        left = self.equality()
        while self.peek().kind is Kind.AND:
            self.take()
            right_first = self.peek()
            right = self.equality()
            left = And(checks.as_condition(left, self.text, first),
                       checks.as_condition(right, self.text, right_first))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while (op := self.peek()).kind in _EQUALITY_LOOP:
            self.take()
            if op.kind is Kind.IS:
                negated = self.peek().kind is not Kind.NULL
                if negated:
                    self.expect(Kind.NOT, "NULL or NOT NULL after IS")
                self.expect(Kind.NULL, "NULL after IS NOT" if negated else "NULL")
                left = IsNull(left, negated)
                continue
            right = self.comparison()
            checks.check_equal(left, right, self.text, op)
            left = Compare("=" if op.kind is Kind.EQ else "<>", left, right)
        return left

    def comparison(self) -> Node:
        left = self.unary()
        while (op := self.peek()).kind in _COMPARISON_LOOP:
            self.take()
            negated = op.kind is Kind.NOT
            kind = self.take().kind if negated and self.peek().kind in (
                Kind.BETWEEN, Kind.IN) else op.kind
            if kind is Kind.NOT:
                raise self.error(self.peek(), "BETWEEN or IN after NOT")
            if kind is Kind.BETWEEN:
                low = self.unary()
                self.expect(Kind.AND, "AND between the bounds of BETWEEN")
                high = self.unary()
                if negated:
                    for node in (left, low, high):
                        checks.check_ordered(node, self.text, op)
                else:
                    checks.check_between(left, low, high, self.text, op)
                left = Between(left, low, high, negated)
            elif kind is Kind.IN:
                values = self.in_list()
                left = In(checks.check_in(left, self.text, op), values, negated)
            else:
                right = self.unary()
                checks.check_ordered(left, self.text, op)
                checks.check_ordered(right, self.text, op)
                left = Compare(_ORDERING[kind], left, right)
        return left

    def in_list(self) -> tuple[str, ...]:
        self.expect(Kind.LPAREN, '"(" after IN')
        values = [self.string("a 'string' in the IN list (IN takes strings only)")]
        while self.peek().kind is Kind.COMMA:
            self.take()
            values.append(self.string("a 'string' after \",\" (IN takes strings only)"))
        self.expect(Kind.RPAREN, '"," or ")" in the IN list')
        return tuple(values)

    def string(self, expected: str) -> str:
        image = self.expect(Kind.STRING, expected).image
        return image[1:-1].replace("''", "'")

    def unary(self) -> Node:
        tok = self.peek()
        self.nesting += 1
        if self.nesting > MAX_NESTING + 1:  # the outermost operand is no nesting
            raise FilterSyntaxError(f"Too much nesting at {where(self.text, tok.start)}: "
                                    f"more than {MAX_NESTING} levels of parentheses, NOT, + "
                                    "or -", text=self.text, position=tok.start, token=tok.image)
        if tok.kind is Kind.PLUS:
            self.take()
            node = self.unary()
        elif tok.kind is Kind.MINUS:
            self.take()
            node = Negate(self.unary())
        elif tok.kind is Kind.NOT:
            self.take()
            operand_first = self.peek()
            node = Not(checks.as_condition(self.unary(), self.text, operand_first))
        else:
            node = self.primary()
        self.nesting -= 1
        return node

    def primary(self) -> Node:
        tok = self.take()
        match tok.kind:
            case Kind.STRING:
                return Literal(tok.image[1:-1].replace("''", "'"))
            case Kind.DECIMAL:
                return Literal(checks.integer_literal(tok, self.text))
            case Kind.FLOAT:
                return Literal(checks.float_literal(tok, self.text))
            case Kind.TRUE | Kind.FALSE:
                return Literal(tok.kind is Kind.TRUE)
            case Kind.NULL:
                return Literal(None)
            case Kind.ID:
                return Property(tok.image)
            case Kind.LPAREN:
                node = self.or_expr()
                self.expect(Kind.RPAREN, '")" or an operator')
                return node
        if tok.kind is Kind.EQ:
            raise self.error(tok, _VALUE + '; equality is a single "="')
        raise self.error(tok, _VALUE)
