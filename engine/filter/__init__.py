"""SQL92 message selectors (expressionType "SQL92"), with RocketMQ 4.9.7's semantics."""

from __future__ import annotations

from engine.filter.errors import (
    FilterError,
    FilterEvaluationError,
    FilterSemanticError,
    FilterSyntaxError,
)
from engine.filter.sql92 import Sql92Filter, compile_sql92

__all__ = [
    "FilterError",
    "FilterEvaluationError",
    "FilterSemanticError",
    "FilterSyntaxError",
    "Sql92Filter",
    "compile_sql92",
]
