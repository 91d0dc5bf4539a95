"""Property tests: any text compiles or fails cleanly; results agree with plain Python."""

from __future__ import annotations

import operator
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from engine.filter import FilterEvaluationError, FilterSyntaxError, compile_sql92

FRAGMENTS = [
    "a", "b", "c", "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "=",
    "<>", ">", ">=", "<", "<=", "(", ")", ",", "+", "-", "'x'", "'1'", "''", "'", "1", "0",
    "2.5", ".5", "1e3", "0.0", "5L", "9223372036854775808", "/*", "*/", "--", "\n", "!", ".",
    "$", "_", "contains",
]
junk = st.lists(st.sampled_from(FRAGMENTS), max_size=12).map(" ".join) | st.text(max_size=30)
prop_values = st.sampled_from(["1", "2.5", "-3", "x", "", "true", "NaN", "1e3", " 4"])
props = st.dictionaries(st.sampled_from(["a", "b", "c"]), prop_values)


@given(junk, props)
def test_any_text_compiles_or_raises_a_syntax_error(text: str, properties: dict[str, str]) -> None:
    try:
        f = compile_sql92(text)
    except FilterSyntaxError as err:
        assert "\n" not in str(err)
        assert 0 <= err.position <= len(text)
        return
    assert isinstance(f.matches(properties), bool)
    try:
        assert f.evaluate(properties) in (True, False, None)
    except FilterEvaluationError:
        assert f.matches(properties) is False
    again = compile_sql92(f.canonical())
    assert again.expression == f.expression
    assert again.ignored == ""


OPS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq, "<>": operator.ne, ">": operator.gt, ">=": operator.ge,
    "<": operator.lt, "<=": operator.le,
}
longs = st.integers(-(2**63) + 1, 2**63 - 1)
finite = st.floats(allow_nan=False, allow_infinity=False)


def literal(n: float) -> str:
    return f"-{abs(n)!r}" if n < 0 else repr(n)


@given(st.integers(-(2**31) + 1, 2**31 - 1), longs, st.sampled_from(sorted(OPS)))
def test_integer_comparisons_agree_with_python(prop: int, lit: int, op: str) -> None:
    f = compile_sql92(f"a {op} {literal(lit)}")
    assert f.matches({"a": str(prop)}) is OPS[op](prop, lit)


@given(finite, finite.filter(lambda x: x != 0), st.sampled_from(sorted(OPS)))
def test_double_comparisons_agree_with_python(prop: float, lit: float, op: str) -> None:
    f = compile_sql92(f"a {op} {literal(lit)}")
    assert f.matches({"a": repr(prop)}) is OPS[op](prop, lit)


# three-valued logic: atoms `pN = 'y'` are TRUE ('y'), FALSE ('n') or unknown (absent)
Formula = tuple[object, ...]
atoms = st.sampled_from(["p0", "p1", "p2", "p3"]).map(lambda p: ("atom", p))
formulas = st.recursive(atoms, lambda inner: st.one_of(
    st.tuples(st.just("not"), inner),
    st.tuples(st.sampled_from(["and", "or"]), inner, inner)), max_leaves=12)
truth = st.dictionaries(st.sampled_from(["p0", "p1", "p2", "p3"]), st.sampled_from(["y", "n"]))


def to_sql(f: Formula) -> str:
    if f[0] == "atom":
        return f"{f[1]} = 'y'"
    if f[0] == "not":
        return f"NOT ({to_sql(f[1])})"  # type: ignore[arg-type]
    return f"({to_sql(f[1])}) {f[0].upper()} ({to_sql(f[2])})"  # type: ignore[arg-type,attr-defined]


def kleene(f: Formula, env: dict[str, str]) -> bool | None:
    if f[0] == "atom":
        v = env.get(f[1])  # type: ignore[arg-type]
        return None if v is None else v == "y"
    if f[0] == "not":
        x = kleene(f[1], env)  # type: ignore[arg-type]
        return None if x is None else not x
    x, y = kleene(f[1], env), kleene(f[2], env)  # type: ignore[arg-type]
    if f[0] == "and":
        return False if False in (x, y) else None if None in (x, y) else True
    return True if True in (x, y) else None if None in (x, y) else False


@given(formulas, truth)
def test_logic_is_kleene_three_valued(formula: Formula, env: dict[str, str]) -> None:
    f = compile_sql92(to_sql(formula))
    expected = kleene(formula, env)
    assert f.evaluate(env) is expected
    assert f.matches(env) is (expected is True)
