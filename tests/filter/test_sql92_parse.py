"""Tests of the selector grammar: tokens, literals, precedence, trees and what is left unread."""

from __future__ import annotations

import pytest

from engine.filter import FilterSyntaxError, Sql92Filter, compile_sql92
from engine.filter.lexer import Kind, Lexer
from engine.filter.nodes import (
    And,
    Between,
    BooleanCast,
    Compare,
    In,
    IsNull,
    Literal,
    Negate,
    Not,
    Or,
    Property,
)
from engine.filter.parser import MAX_NESTING

a, b, c = Property("a"), Property("b"), Property("c")


def tree(text: str) -> object:
    return compile_sql92(text).expression


def kinds(text: str) -> list[Kind]:
    lexer = Lexer(text)
    out = []
    while (tok := lexer.next()).kind is not Kind.EOF:
        out.append(tok.kind)
    return out


def test_tokens_longest_match_and_keywords() -> None:
    assert kinds("a<>b<=c>=d<e>f=g") == [
        Kind.ID, Kind.NE, Kind.ID, Kind.LE, Kind.ID, Kind.GE, Kind.ID, Kind.LT, Kind.ID,
        Kind.GT, Kind.ID, Kind.EQ, Kind.ID]
    assert kinds("not Not NOTE in_ $x _1 isnull Is") == [
        Kind.NOT, Kind.NOT, Kind.ID, Kind.ID, Kind.ID, Kind.ID, Kind.ID, Kind.IS]
    assert kinds("5 5L 0 0L 05 5. .5 5e3 5.5E-3 1.2.3") == [
        Kind.DECIMAL, Kind.DECIMAL, Kind.DECIMAL, Kind.DECIMAL, Kind.ID, Kind.DECIMAL,
        Kind.DECIMAL, Kind.FLOAT, Kind.FLOAT, Kind.FLOAT, Kind.FLOAT, Kind.FLOAT, Kind.FLOAT]
    assert kinds("(+-,)") == [Kind.LPAREN, Kind.PLUS, Kind.MINUS, Kind.COMMA, Kind.RPAREN]


def test_contains_startswith_endswith_are_not_keywords_in_4_9_7() -> None:
    assert kinds("CONTAINS STARTSWITH ENDSWITH like") == [Kind.ID] * 4


def test_whitespace_and_comments_are_skipped() -> None:
    assert tree("\ta\r\n=\f1 /* note */ AND /**/ b -- end\n = 2") == And(
        Compare("=", a, Literal(1)), Compare("=", b, Literal(2)))
    assert tree("a = /* a * b ** / */ 'x'") == Compare("=", a, Literal("x"))


@pytest.mark.parametrize(("text", "value"), [
    ("'x'", "x"), ("''", ""), ("'it''s'", "it's"), ("''''", "'"), ("'a\nb'", "a\nb"),
    ("'été'", "été"), ("5", 5), ("5L", 5), ("5l", 5), ("2147483647", 2**31 - 1),
    ("3000000000", 3000000000), ("9223372036854775807", 2**63 - 1), ("1.5", 1.5),
    ("5.", 5.0), (".5", 0.5), ("5e3", 5000.0), ("5E+3", 5000.0), ("25e-1", 2.5),
    ("4.9E-324", 5e-324), ("1.7976931348623157E308", 1.7976931348623157e308),
    ("TRUE", True), ("false", False), ("NuLl", None),
])
def test_literals(text: str, value: object) -> None:
    node = tree(f"a = {text}") if value is not None else tree(f"a IS NULL OR {text}")
    if value is None:
        assert node == Or(IsNull(a, False), Literal(None))
    else:
        assert node == Compare("=", a, Literal(value))
        assert type(node.right.value) is type(value)  # type: ignore[attr-defined]


def test_negative_numbers_are_negations() -> None:
    assert tree("a > -5") == Compare(">", a, Negate(Literal(5)))
    assert tree("a > +5") == Compare(">", a, Literal(5))
    assert tree("a > - - 5") == Compare(">", a, Negate(Negate(Literal(5))))


def test_property_names() -> None:
    assert tree("_a$1 = 'x'") == Compare("=", Property("_a$1"), Literal("x"))
    assert tree("TAGS = 'x'") == Compare("=", Property("TAGS"), Literal("x"))
    assert tree("Tags IS NULL") == IsNull(Property("Tags"), False)


def test_every_construct() -> None:
    assert tree("a <> 'x'") == Compare("<>", a, Literal("x"))
    for op in (">", ">=", "<", "<="):
        assert tree(f"a {op} 1") == Compare(op, a, Literal(1))  # type: ignore[arg-type]
    assert tree("a BETWEEN 1 AND 2") == Between(a, Literal(1), Literal(2), False)
    assert tree("a not between 1 and 2") == Between(a, Literal(1), Literal(2), True)
    assert tree("a IN ('x', 'y')") == In(a, ("x", "y"), False)
    assert tree("a NOT IN ('x')") == In(a, ("x",), True)
    assert tree("a IS NULL") == IsNull(a, False)
    assert tree("a IS NOT NULL") == IsNull(a, True)
    assert tree("NOT a") == Not(BooleanCast(a))
    assert tree("a") == BooleanCast(a)
    assert tree("(a)") == BooleanCast(a)
    assert tree("TRUE") == Literal(True)
    assert tree("NULL") == Literal(None)


def test_and_binds_tighter_than_or() -> None:
    x, y, z = (Compare("=", p, Literal(1)) for p in (a, b, c))
    assert tree("a = 1 OR b = 1 AND c = 1") == Or(x, And(y, z))
    assert tree("a = 1 AND b = 1 OR c = 1") == Or(And(x, y), z)
    assert tree("(a = 1 OR b = 1) AND c = 1") == And(Or(x, y), z)
    assert tree("a = 1 OR b = 1 OR c = 1") == Or(Or(x, y), z)


def test_comparison_binds_tighter_than_equality_and_not_tightest() -> None:
    assert tree("a > 1 = TRUE") == Compare("=", Compare(">", a, Literal(1)), Literal(True))
    assert tree("a = 'x' = TRUE") == Compare("=", Compare("=", a, Literal("x")), Literal(True))
    assert tree("NOT a = 'x'") == Compare("=", Not(BooleanCast(a)), Literal("x"))
    assert tree("NOT (a = 'x')") == Not(Compare("=", a, Literal("x")))
    assert tree("NOT NOT a IS NULL") == IsNull(Not(Not(BooleanCast(a))), False)
    assert tree("a IN ('x') = FALSE") == Compare("=", In(a, ("x",), False), Literal(False))


def test_between_takes_unary_bounds_and_its_and_is_not_logical() -> None:
    assert tree("a BETWEEN -1 AND 2 AND b = 1") == And(
        Between(a, Negate(Literal(1)), Literal(2), False), Compare("=", b, Literal(1)))


def test_rocketmq_stops_reading_after_a_complete_expression() -> None:
    f = compile_sql92("a = 1 b = 2")
    assert f.expression == Compare("=", a, Literal(1))
    assert f.ignored == "b = 2"
    assert compile_sql92("a = 1) junk").ignored == ") junk"
    assert compile_sql92("a = 0L").ignored == "L"
    assert compile_sql92("a > 5.5d").ignored == "d"
    assert compile_sql92("a = 'it's'").ignored == "s'"  # an unescaped quote ends the string
    # a line comment needs its line end: without one it is two minus signs
    assert compile_sql92("a = 1 -- comment").ignored == "-- comment"
    assert compile_sql92("a = 1 -- comment\n").ignored == ""
    # 5.x operators are plain names in 4.9.7: `a` alone (never TRUE) is what remains
    f = compile_sql92("a CONTAINS 'x'")
    assert f.expression == BooleanCast(a)
    assert f.ignored == "CONTAINS 'x'"
    # only the first unread token is read: a lexical error there is still an error
    assert compile_sql92("a = 1 x !").ignored == "x !"
    with pytest.raises(FilterSyntaxError, match="column 7"):
        compile_sql92("a = 1 !")
    with pytest.raises(FilterSyntaxError, match="Unterminated"):
        compile_sql92("a = 1 'open")


def test_strict_refuses_what_rocketmq_ignores() -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92("a = 1 b = 2", strict=True)
    assert str(info.value) == (
        'Encountered "b" at column 7; expected AND, OR or the end of the expression')
    assert compile_sql92("a = 1 ", strict=True).ignored == ""


def test_canonical_text_compiles_to_the_same_tree() -> None:
    for text in ("a = 1 OR b = 1 AND NOT c", "NOT a = 'it''s'", "a NOT BETWEEN -1.5 AND 2",
                 "a IN ('x', 'y') AND b IS NOT NULL", "- -a > 3000000000 OR TRUE"):
        f = compile_sql92(text)
        assert compile_sql92(f.canonical()).expression == f.expression


def test_long_chains_and_deep_nesting() -> None:
    chain = " AND ".join(f"p{i} = '{i}'" for i in range(3000))
    f = compile_sql92(chain)
    assert f.matches({f"p{i}": str(i) for i in range(3000)})
    assert not f.matches({f"p{i}": str(i) for i in range(2999)})
    assert compile_sql92("(" * MAX_NESTING + "a" + ")" * MAX_NESTING).matches({}) is False
    with pytest.raises(FilterSyntaxError, match="nesting"):
        compile_sql92("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1))
    with pytest.raises(FilterSyntaxError, match="nesting"):
        compile_sql92("NOT " * 500 + "a")
    with pytest.raises(FilterSyntaxError, match="levels deep"):
        compile_sql92("a IS NULL" + " = TRUE" * 300)


def test_compile_keeps_the_text_and_caches() -> None:
    f = compile_sql92("a = 'x'")
    assert isinstance(f, Sql92Filter)
    assert f.text == "a = 'x'"
    assert compile_sql92("a = 'x'") is f
    assert f == compile_sql92("a = 'x'") and hash(f) == hash(compile_sql92("a = 'x'"))
    assert "a = 'x'" in repr(f)
