"""Fixtures of the controller tests: broker processes (killed when a test ends)."""

from __future__ import annotations

from tests.ha.procs import brokers

__all__ = ["brokers"]
