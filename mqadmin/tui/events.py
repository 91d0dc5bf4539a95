"""The events workers post to screens (textual messages): small dataclasses, never widgets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.message import Message


@dataclass
class Loaded(Message):
    """A screen's refresh finished: `data` is whatever its `fetch` returned."""

    data: Any
    elapsed: float  # seconds the fetch took


@dataclass
class Failed(Message):
    """A screen's refresh failed: what happened, what to check, when it is tried again."""

    error: str
    retry_in: float


@dataclass
class HealthChanged(Message):
    """The header's cluster health was read again (or could not be)."""

    text: Text
    ok: bool


@dataclass
class Step(Message):
    """One step of a running change (a switchover's timeline, a progress tick)."""

    text: str


@dataclass
class Searched(Message):
    """A search (or a read a key asked for) finished: its result, or what went wrong."""

    data: Any
    error: str = ""
