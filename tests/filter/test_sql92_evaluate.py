"""Tests of evaluation: every construct, RocketMQ 4.9.7's conversions and its NULL rules."""

from __future__ import annotations

import pytest

from engine.filter import FilterEvaluationError, compile_sql92


def match(text: str, **props: str) -> bool:
    return compile_sql92(text).matches(props)


def value(text: str, **props: str) -> bool | None:
    return compile_sql92(text).evaluate(props)


def test_string_equality() -> None:
    assert match("region = 'eu'", region="eu")
    assert not match("region = 'eu'", region="EU")
    assert not match("region = 'eu'", region="eu ")
    assert match("region <> 'eu'", region="us")
    assert not match("region <> 'eu'", region="eu")
    assert match("q = 'it''s'", q="it's")
    assert match("'eu' = region", region="eu")
    assert match("a = b", a="x", b="x") and not match("a = b", a="x", b="y")
    assert not match("Region = 'eu'", region="eu")  # property names are case-sensitive


@pytest.mark.parametrize(("text", "price", "expected"), [
    ("price > 10", "11", True), ("price > 10", "10", False), ("price >= 10", "10", True),
    ("price < 10", "9", True), ("price < 10", "10", False), ("price <= 10", "10", True),
    ("price = 10", "10", True), ("price <> 10", "10", False), ("price <> 10", "11", True),
    ("price > -5", "-4", True), ("price < -5", "-6", True), ("price = +5", "+5", True),
    ("price = 5", "005", True), ("price > 10.5", "10.6", True), ("price = 10.0", "10", True),
    ("price >= 1.5", "1.5", True), ("10 < price", "11", True), ("10 = price", "10", True),
    ("price > 3000000000", "3000000001", True), ("price < 3000000000", "-3000000000", True),
])
def test_a_property_compared_with_a_number(text: str, price: str, expected: bool) -> None:
    assert match(text, price=price) is expected


@pytest.mark.parametrize(("text", "price"), [
    # next to an Integer literal the property is read with Integer.valueOf:
    ("price > 10", "10.5"), ("price > 10", "1e3"), ("price > 10", " 11"), ("price > 10", "1_1"),
    ("price = 5", "3000000000"), ("price > 10", ""), ("price > 10", "ten"),
    ("price <> 10", "ten"), ("price > 10", "11L"),
    # next to a Long literal with Long.valueOf:
    ("price > 3000000000", "1e10"), ("price > 3000000000", "99999999999999999999"),
    # next to a Double literal with Double.valueOf:
    ("price > 1.5", "ten"), ("price > 1.5", "1,5"), ("price > 1.5", ""),
])
def test_a_property_that_does_not_parse_never_matches(text: str, price: str) -> None:
    f = compile_sql92(text)
    assert not f.matches({"price": price})
    with pytest.raises(FilterEvaluationError):
        f.evaluate({"price": price})


@pytest.mark.parametrize(("price", "expected"), [
    (" 11 ", True), ("11d", True), ("1.1e1", True), ("0x1.8p3", True), ("Infinity", True),
    ("-Infinity", False), ("NaN", True), ("+12.F", True), ("٣٣", False),
])
def test_double_valueof_rules(price: str, expected: bool) -> None:
    f = compile_sql92("price > 10.5")
    if price == "٣٣":
        assert not f.matches({"price": price})
    else:
        assert f.matches({"price": price}) is expected


def test_java_integer_parsing_accepts_other_decimal_digits() -> None:
    assert match("n = 33", n="٣٣")  # Character.digit reads any Unicode decimal digit
    assert match("n = 7", n="0" * 5000 + "7")


def test_nan_and_negative_zero_follow_double_compare() -> None:
    assert match("a > 1.5", a="NaN") and not match("a < 1.5", a="NaN")
    assert match("a = b", a="NaN", b="NaN")  # strings: equal as strings
    assert match("a >= b", a="NaN", b="NaN")
    assert not match("a >= b", a="-0.0", b="0.0")  # Double.compareTo: -0.0 < 0.0
    assert match("a < b", a="-0.0", b="0")


def test_two_properties_are_ordered_as_doubles() -> None:
    assert match("a > b", a="10", b="9")  # not as strings, where "10" < "9"
    assert match("a > b", a="2", b="1.5")
    assert not match("a > b", a="x", b="1")
    assert not match("a > b", a="1", b="")


def test_between_and_not_between() -> None:
    assert match("a BETWEEN 1 AND 3", a="1") and match("a BETWEEN 1 AND 3", a="3")
    assert not match("a BETWEEN 1 AND 3", a="4") and not match("a BETWEEN 1 AND 3", a="0")
    assert match("a BETWEEN -1.5 AND 1.5", a="-1.5")
    assert match("a NOT BETWEEN 1 AND 3", a="4") and match("a NOT BETWEEN 1 AND 3", a="0")
    assert not match("a NOT BETWEEN 1 AND 3", a="2")
    assert not match("a BETWEEN -5 AND -10", a="-7")  # accepted, but never true
    assert match("a NOT BETWEEN 5 AND 1", a="3")
    assert not match("a BETWEEN 1 AND 3", a="x")
    assert value("a BETWEEN 1 AND 3") is None and value("a NOT BETWEEN 1 AND 3") is None
    assert match("a BETWEEN b AND c", a="2", b="1", c="3")


def test_in_and_not_in() -> None:
    assert match("a IN ('x', 'y')", a="y") and not match("a IN ('x', 'y')", a="z")
    assert match("a NOT IN ('x', 'y')", a="z") and not match("a NOT IN ('x', 'y')", a="x")
    many = "a IN (" + ", ".join(f"'{i}'" for i in range(50)) + ")"
    assert match(many, a="42") and not match(many, a="50")
    assert value("a IN ('x')") is None and value("a NOT IN ('x')") is None
    assert not match("a IN ('1')", a="01")  # strings, never numbers


def test_is_null_and_is_not_null() -> None:
    assert value("a IS NULL") is True and value("a IS NULL", a="") is False
    assert value("a IS NOT NULL") is False and value("a IS NOT NULL", a="") is True
    assert value("a > 1 IS NULL") is True and value("a > 1 IS NULL", a="2") is False
    assert value("-a IS NULL", a="x") is True  # minus of a string is NULL


def test_true_false_null_literals() -> None:
    assert match("TRUE") and not match("FALSE") and not match("NULL")
    assert value("NULL") is None and value("NOT NULL") is None
    assert match("TRUE = TRUE") and match("1 = 1") and match("1 = 1.0") and match("'1' = 1")
    assert not match("1 = TRUE")  # an Integer and a Boolean do not compare: "less than"


def test_boolean_properties_go_through_boolean_valueof() -> None:
    for text in ("true", "TRUE", "True"):
        assert match("flag = TRUE", flag=text)
    assert not match("flag = TRUE", flag="yes")
    assert not match("flag = TRUE", flag="1")
    assert match("flag = FALSE", flag="no")  # anything but "true" reads as false
    assert match("flag <> TRUE", flag="no")
    assert match("'TRUE' = TRUE")


def test_a_bare_property_is_never_true() -> None:
    assert value("flag", flag="true") is False
    assert value("flag") is None
    assert value("NOT flag", flag="false") is True  # the cast is FALSE, so NOT is TRUE
    assert value("NOT flag") is None
    assert value("flag OR a = '1'", flag="true", a="1") is True


def test_not_binds_to_the_next_value() -> None:
    # `NOT a = 'x'` is `(NOT a) = 'x'`: a Boolean compared with a String, which Java
    # cannot do, so it never matches; NOT (a = 'x') is what was meant
    assert not match("NOT a = 'x'", a="y") and not match("NOT a = 'x'", a="x")
    assert not match("NOT a = 'x'")
    assert match("NOT (a = 'x')", a="y")


def test_unknown_is_not_false() -> None:
    assert value("a = 'x'") is None
    assert value("a <> 'x'") is None
    assert value("NOT (a = 'x')") is None
    assert value("a > 1") is None and value("1 < a") is None


def test_equality_with_a_missing_right_side_is_false_not_unknown() -> None:
    # ComparisonExpression's equality: NULL when the left side is null, FALSE when only
    # the right one is
    assert value("'x' = a") is False
    assert value("'x' <> a") is True
    assert value("a = b", a="1") is False and value("a = b", b="1") is None
    assert value("a = b") is True  # both null: equal


@pytest.mark.parametrize(("left", "right", "and_", "or_"), [
    ("TRUE", "TRUE", True, True), ("TRUE", "FALSE", False, True),
    ("TRUE", "NULL", None, True), ("FALSE", "TRUE", False, True),
    ("FALSE", "FALSE", False, False), ("FALSE", "NULL", False, None),
    ("NULL", "TRUE", None, True), ("NULL", "FALSE", False, None), ("NULL", "NULL", None, None),
])
def test_three_valued_and_or(left: str, right: str, and_: bool | None, or_: bool | None) -> None:
    assert value(f"{left} AND {right}") is and_
    assert value(f"{left} OR {right}") is or_


def test_not_of_each_truth_value() -> None:
    assert value("NOT TRUE") is False and value("NOT FALSE") is True
    assert value("NOT (a = 'x')", a="y") is True


def test_a_java_error_drops_the_message_unless_short_circuited_before_it() -> None:
    assert not match("price > 10 OR region = 'eu'", price="cheap", region="eu")
    assert match("region = 'eu' OR price > 10", price="cheap", region="eu")
    assert not match("region = 'us' AND price > 10", price="cheap", region="eu")
    assert not match("NOT (price > 10)", price="cheap")
    assert not match("price > 10 IS NULL", price="cheap")
    with pytest.raises(FilterEvaluationError):
        value("price > 10 OR TRUE", price="cheap")


def test_comparing_a_condition_with_a_string_is_a_java_error() -> None:
    f = compile_sql92("(a > 1) = 'true'")
    with pytest.raises(FilterEvaluationError):
        f.evaluate({"a": "2"})
    assert compile_sql92("'true' = (a > 1)").evaluate({"a": "2"}) is True
    assert compile_sql92("'x' = (a > 1)").evaluate({"a": "2"}) is False


def test_negation_and_unary_plus() -> None:
    assert value("-a = -5", a="5") is None  # minus of a property (a string) is NULL
    assert match("a = -(-5)", a="5")
    assert not match("-a > 1", a="x")
    assert match("a > -1.5", a="-1")
    assert match("a = +b", a="x", b="x")


def test_long_and_integer_ranges() -> None:
    assert match("a = 2147483647", a="2147483647")
    assert not match("a = 2147483647", a="2147483648")  # Integer.valueOf overflows
    assert match("a < 2147483648", a="2147483647")  # next to a Long: Long.valueOf
    assert match("a = 9223372036854775807", a="9223372036854775807")
    assert match("a = -2147483648", a="-2147483648")  # a Long literal, negated


def test_matches_takes_any_mapping_and_empty_properties() -> None:
    f = compile_sql92("a IS NULL AND b IS NULL")
    assert f.matches({}) and f.matches({"c": "1"}) and not f.matches({"a": ""})
