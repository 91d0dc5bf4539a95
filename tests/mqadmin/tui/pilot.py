"""Helpers of the dashboard tests: open the app on a cluster, wait for what it shows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot

from mqadmin.config import Endpoint
from mqadmin.tui.app import Dashboard
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import RowTable

SIZE = (160, 48)


def dashboard(ns: str, *, readonly: bool = False, start: str = "cluster") -> Dashboard:
    return Dashboard(Endpoint([ns], "test"), readonly=readonly, start=start)


async def until(pilot: Pilot[None], check: Callable[[], object], timeout: float = 30,
                what: str = "") -> None:
    """Let the app run until `check()` is true (its messages processed between checks)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await pilot.pause(0.02)


def screen(pilot: Pilot[None]) -> DashScreen:
    current = pilot.app.screen
    assert isinstance(current, DashScreen), current
    return current


async def loaded(pilot: Pilot[None], kind: type[DashScreen], loads: int = 1) -> DashScreen:
    """Wait until the current screen is a `kind` that has refreshed `loads` times (not
    counting the quick partial view some screens draw first)."""
    def done() -> bool:
        shown = pilot.app.screen
        return isinstance(shown, kind) and shown.loads >= loads + int(shown.partial_first)

    await until(pilot, done, what=f"{kind.__name__} loaded")
    return screen(pilot)


def table(pilot: Pilot[None], selector: str | None = None) -> RowTable:
    current = pilot.app.screen
    return current.query_one(selector, RowTable) if selector else current.query(RowTable).first()


def keys_of(pilot: Pilot[None], selector: str | None = None) -> list[str]:
    return [t.key_of(r) for t in [table(pilot, selector)] for r in t.shown_rows()]


async def type_text(pilot: Pilot[None], text: str) -> None:
    """Type `text` as one burst of key events (as a paste or a fast typist would), then let
    the app settle once: `pilot.press` waits for the app to go idle after every key, about
    0.14 s a key here.  The keys are the ones `pilot.press` sends, in order."""
    for char in text:
        key = char if char.isalnum() else _character_to_key(char)
        pilot.app.post_message(events.Key(key, char))
    await pilot.pause()
