"""Tests of compile errors: what RocketMQ 4.9.7 refuses, and messages that say how to fix it."""

from __future__ import annotations

import pytest

from engine.filter import FilterError, FilterSemanticError, FilterSyntaxError, compile_sql92


def error_of(text: str) -> FilterSyntaxError:
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92(text)
    message = str(info.value)
    assert "\n" not in message
    return info.value


@pytest.mark.parametrize(("text", "message"), [
    ("a = 1 AND AND b = 2",
     'Encountered "AND" at column 11; expected a value (a property name, \'string\', number, '
     'TRUE, FALSE, NULL or "(")'),
    ("a = ", 'Encountered end of expression at column 5; expected a value'),
    ("a == 1", 'Encountered "=" at column 4; expected a value'),
    ("(a = 1", 'Encountered end of expression at column 7; expected ")" or an operator'),
    ("(a = 1 b", 'Encountered "b" at column 8; expected ")" or an operator'),
    ("a IS 5", 'Encountered "5" at column 6; expected NULL or NOT NULL after IS'),
    ("a IS NOT 5", 'Encountered "5" at column 10; expected NULL after IS NOT'),
    ("a NOT LIKE 'x%'", 'Encountered "LIKE" at column 7; expected BETWEEN or IN after NOT'),
    ("a BETWEEN 1 OR 2", 'Encountered "OR" at column 13; expected AND between the bounds'),
    ("a IN 'x'", 'Encountered "\'x\'" at column 6; expected "(" after IN'),
    ("a IN ()", 'Encountered ")" at column 7; expected a \'string\' in the IN list'),
    ("a IN (1, 2)", 'Encountered "1" at column 7; expected a \'string\' in the IN list '
                    "(IN takes strings only)"),
    ("a IN ('x' 'y')", 'Encountered "\'y\'" at column 11; expected "," or ")" in the IN list'),
    ("a IN ('x',)", 'Encountered ")" at column 11; expected a \'string\' after ","'),
    ("a = 1\nAND", "Encountered end of expression at line 2, column 4; expected a value"),
])
def test_parse_errors_name_the_token_its_place_and_what_was_expected(
        text: str, message: str) -> None:
    err = error_of(text)
    assert str(err).startswith(message)
    assert not isinstance(err, FilterSemanticError)


def test_error_attributes() -> None:
    err = error_of("a = 1\n  AND OR")
    assert (err.line, err.column, err.position, err.token) == (2, 7, 12, "OR")
    assert err.text == "a = 1\n  AND OR"
    assert err.expected.startswith("a value")
    assert isinstance(err, FilterError) and isinstance(err, ValueError)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "/* only a comment */", "-- note\n"])
def test_empty_expressions(text: str) -> None:
    assert str(error_of(text)).startswith("The expression is empty; write a condition such as")


@pytest.mark.parametrize(("text", "message"), [
    ("a != 1", 'Unexpected character "!=" at column 3; use "<>" for not-equal'),
    ("a = 1 && b = 2", 'Unexpected character "&" at column 7; use AND'),
    ("a = 1 || b = 2", 'Unexpected character "|" at column 7; use OR'),
    ('a = "x"', "Unexpected character '\"' at column 5; strings are quoted with single quotes"),
    ("a.b = 1", 'Unexpected character "." at column 2; property names may only contain'),
    ("a = 'x", "Unterminated string starting at column 5; close it with '"),
    ("a = 'ok' OR b = 'open", "Unterminated string starting at column 17"),
    ("a = 1 /* open", 'Unexpected character "/" at column 7; a /* comment */ must be closed'),
    ("a = 1 # x", 'Unexpected character "#" at column 7'),
    ("é = 1", 'Unexpected character "é" at column 1'),
])
def test_lexical_errors(text: str, message: str) -> None:
    assert str(error_of(text)).startswith(message)


@pytest.mark.parametrize(("text", "message"), [
    ("5", "Expected a condition at column 1 but found the value 5; a condition is e.g."),
    ("'x'", "Expected a condition at column 1 but found the value 'x'"),
    ("-a", "Expected a condition at column 1 but found the value (-a)"),
    ("a = 1 AND 5", "Expected a condition at column 11 but found the value 5"),
    ("5 OR a = 1", "Expected a condition at column 1 but found the value 5"),
    ("NOT 'x'", "Expected a condition at column 5 but found the value 'x'"),
    ("a > 'x'", 'Cannot use the value \'x\' with ">" at column 3: only numbers and properties '
                "can be ordered; strings and TRUE/FALSE only support = and <>"),
    ("'x' <= a", 'Cannot use the value \'x\' with "<=" at column 5'),
    ("a < TRUE", 'Cannot use the value TRUE with "<" at column 3'),
    ("a >= NULL", 'Cannot use the value NULL with ">=" at column 3'),
    ("+'x' > a", 'Cannot use the value \'x\' with ">"'),
    ("NOT a > 1", 'Cannot use a condition (NOT a) with ">" at column 7: only numbers and '
                  "properties can be ordered; NOT applies to the value right after it"),
    ("(a = 1) > 0", 'Cannot use a condition (a = 1) with ">"'),
    ("a > 1 > 0", 'Cannot use a condition (a > 1) with ">" at column 7'),
    ("a BETWEEN 'a' AND 'z'", "Cannot use the value 'a' with \"BETWEEN\" at column 3"),
    ("a NOT BETWEEN 1 AND 'z'", "Cannot use the value 'z' with \"NOT\" at column 3"),
    ("a BETWEEN NULL AND 5", 'Cannot use the value NULL with "BETWEEN"'),
    ("a BETWEEN 5 AND 1", "BETWEEN 5 AND 1 at column 3: the lower bound must come first"),
    ("a BETWEEN 2.5 AND 2", "BETWEEN 2.5 AND 2 at column 3: the lower bound must come first"),
    ("a = NULL", 'Cannot compare with NULL using "=" at column 3; use IS NULL or IS NOT NULL'),
    ("NULL <> a", 'Cannot compare with NULL using "<>" at column 6'),
    ("TRUE = 1", "Cannot compare TRUE with 1 at column 6; TRUE and FALSE compare with a "
                 "property or a condition"),
    ("FALSE <> 'x'", "Cannot compare FALSE with 'x' at column 7"),
    ("5 IN ('x')", '"IN" at column 3 needs a property name on its left, found 5'),
    ("(a = 1) NOT IN ('x')", '"NOT" at column 9 needs a property name on its left'),
    ("a > 9223372036854775808", "Integer 9223372036854775808 at column 5 is out of range; "
                                "the largest is 9223372036854775807"),
    ("a > " + "9" * 5000, "Integer 999"),
    ("a > 1e309", "Number 1e309 at column 5 is too large for a double"),
    ("a > 0.0", "Number 0.0 at column 5 is refused: RocketMQ 4.9.7 rejects decimal literals "
                "below 4.9E-324, so write 0 for zero"),
    ("a > 1e-400", "Number 1e-400 at column 5 is refused"),
])
def test_operands_rocketmq_refuses(text: str, message: str) -> None:
    err = error_of(text)
    assert isinstance(err, FilterSemanticError)
    assert str(err).startswith(message)


@pytest.mark.parametrize("text", [
    # what those rules still let through
    "a = TRUE", "TRUE = a", "TRUE = FALSE", "1 = TRUE", "'x' = TRUE", "a > -'x'", "a > b",
    "a BETWEEN -5 AND -10", "a NOT BETWEEN 5 AND 1", "a BETWEEN 1 AND 1", "a BETWEEN 1 AND 1.5",
    "a > 0", "a > 4.9E-324", "(a) IN ('x')", "NOT NULL", "NULL", "FALSE", "a IS NULL IS NULL",
    "a = 9223372036854775807", "a > -9223372036854775807",
])
def test_operands_rocketmq_accepts(text: str) -> None:
    compile_sql92(text)
