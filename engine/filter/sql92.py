"""The public face of the SQL92 filter: `compile_sql92` and the `Sql92Filter` it returns."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.filter.errors import FilterEvaluationError, FilterSyntaxError, where
from engine.filter.evaluate import Evaluator, build
from engine.filter.nodes import Node, render
from engine.filter.parser import parse

CACHE_SIZE = 512  # distinct expressions kept compiled; RocketMQ's parser keeps 100


@dataclass(frozen=True, slots=True)
class Sql92Filter:
    """A compiled selector; immutable, so one instance serves every subscription using it."""

    text: str  # the expression as the consumer sent it
    expression: Node = field(repr=False, compare=False)
    ignored: str = field(repr=False, compare=False)  # unread tail, ignored by RocketMQ too
    _evaluate: Evaluator = field(repr=False, compare=False)

    def matches(self, properties: Mapping[str, str]) -> bool:
        """True only when the expression is TRUE; unknown, FALSE and Java errors are False."""
        try:
            return self._evaluate(properties) is True
        except FilterEvaluationError:
            return False

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """The three-valued result: True, False or None (unknown).

        Raises:
            FilterEvaluationError: RocketMQ's evaluator throws on this message (for example a
                property that is not a number compared with a number).
        """
        result = self._evaluate(properties)
        assert result is None or isinstance(result, bool)
        return result

    def canonical(self) -> str:
        """The expression with every operator parenthesised; compiles to the same filter."""
        return render(self.expression)


def compile_sql92(text: str, *, strict: bool = False) -> Sql92Filter:
    """Compile a SQL92 selector as RocketMQ 4.9.7 does; results are cached by text.

    Args:
        text: the consumer's expression, e.g. ``region = 'eu' AND price > 10``.
        strict: refuse text after a complete expression, which RocketMQ silently ignores
            (``a = 1 b = 2`` is ``a = 1`` there).

    Raises:
        FilterSyntaxError: the expression does not compile; the message says where and why.
    """
    compiled = _compile(text)
    if strict and compiled.ignored:
        at = len(text) - len(compiled.ignored)
        word = compiled.ignored.split(None, 1)[0]
        raise FilterSyntaxError(
            f'Encountered "{word}" at {where(text, at)}; expected AND, OR or the end of the '
            "expression", text=text, position=at, token=word,
            expected="AND, OR or the end of the expression")
    return compiled


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile(text: str) -> Sql92Filter:
    parsed = parse(text)
    ignored = "" if parsed.rest is None else text[parsed.rest:]
    return Sql92Filter(text, parsed.node, ignored, build(parsed.node))
