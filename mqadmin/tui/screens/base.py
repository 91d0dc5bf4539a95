"""`DashScreen`: what every dashboard screen shares — the header, the problem banner, the
`/` filter, and a refresh loop with backoff that runs only while the screen is shown.

How this works: while a screen is shown, one exclusive worker loops: it awaits the screen's
`fetch(admin)` on the backend thread, posts `Loaded` (or `Failed` with the error and what to
check), then waits for the refresh interval or for Ctrl+R.  After a failure the wait doubles
up to `MAX_BACKOFF`, so an unreachable cluster is retried without being hammered and the
screen stays usable.  `present(data)` (run on the UI loop) draws the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.exit_codes import message_for
from mqadmin.tui.events import Failed, Loaded
from mqadmin.tui.widgets.footer import KeysFooter
from mqadmin.tui.widgets.header import StatusHeader
from mqadmin.tui.widgets.table import RowTable

if TYPE_CHECKING:
    from mqadmin.tui.app import Dashboard

#: Longest wait between two refreshes of an unreachable cluster, in seconds.
MAX_BACKOFF = 60.0


class DashScreen(Screen[None]):
    """A screen fed by a refresh loop; subclasses give `fetch`, `present` and `body`."""

    TITLE: ClassVar[str] = ""
    #: Seconds between refreshes while the cluster answers.
    REFRESH_EVERY: ClassVar[float] = 5.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("ctrl+r", "refresh_now", "Refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._wake = asyncio.Event()
        self.loaded_at: float | None = None
        self.loads = 0
        self.data: Any = None
        self._had_first = False  # the quick first view was read (see fetch_first)

    @property
    def dashboard(self) -> Dashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield StatusHeader()
        yield Static(self.heading(), id="title")
        yield Static("", id="banner")
        yield from self.body()
        yield Input(placeholder="filter (Enter keeps it, Esc clears it)", id="filter")
        yield KeysFooter()

    def heading(self) -> str:
        return self.TITLE

    def body(self) -> ComposeResult:
        raise NotImplementedError

    async def fetch(self, admin: MQAdmin) -> Any:
        """Read what the screen shows (runs on the backend loop)."""
        raise NotImplementedError

    async def fetch_first(self, admin: MQAdmin) -> Any:
        """The first read: a screen whose full read is slow returns a quicker, partial view
        here (drawn at once, then completed by `fetch` right after)."""
        return await self.fetch(admin)

    @property
    def partial_first(self) -> bool:
        return type(self).fetch_first is not DashScreen.fetch_first

    def present(self, data: Any) -> None:
        """Draw `data` (runs on the UI loop)."""
        raise NotImplementedError

    def show_summary(self, text: str, failures: Sequence[str] = ()) -> None:
        """The line under the table, naming the servers that did not answer."""
        if failures:
            text += "\nNot answering: " + "; ".join(failures)
        self.query_one("#summary", Static).update(text)

    @property
    def table(self) -> RowTable | None:
        """The table `/` filters (the first one)."""
        found = self.query(RowTable)
        return found.first() if found else None

    # ------------------------------------------------------------------ refresh loop

    def on_screen_resume(self) -> None:
        self.refresh_loop()

    def on_screen_suspend(self) -> None:
        self.workers.cancel_group(self, "refresh")

    @work(exclusive=True, group="refresh")
    async def refresh_loop(self) -> None:
        failures = 0
        while True:
            self._wake.clear()
            started = time.perf_counter()
            first = not self._had_first and self.partial_first
            try:
                data = await self.dashboard.backend.call(
                    self.fetch_first if first else self.fetch)
            except Exception as exc:
                failures += 1
                delay = min(self.REFRESH_EVERY * 2 ** failures, MAX_BACKOFF)
                self.post_message(Failed(message_for(exc), delay))
            else:
                failures = 0
                self._had_first = True
                delay = 0.0 if first else self.REFRESH_EVERY
                self.post_message(Loaded(data, time.perf_counter() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        self.data = message.data
        self.loaded_at = time.time()
        self.loads += 1
        banner = self.query_one("#banner", Static)
        banner.update("")
        banner.remove_class("shown")
        self.present(message.data)
        self.dashboard.refreshed()

    def on_failed(self, message: Failed) -> None:
        message.stop()
        banner = self.query_one("#banner", Static)
        banner.update(f"⚠ {message.error}\n  Retrying in {message.retry_in:.0f} s "
                      "(Ctrl+R now); what is shown is from the last successful refresh.")
        banner.add_class("shown")

    def action_refresh_now(self) -> None:
        self._wake.set()

    # ------------------------------------------------------------------ filter

    def action_filter(self) -> None:
        if self.table is None:
            return
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if self.table is not None:
            self.table.set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        self._close_filter(keep=True)

    def _close_filter(self, *, keep: bool) -> None:
        box = self.query_one("#filter", Input)
        if not keep:
            box.value = ""
            if self.table is not None:
                self.table.set_filter("")
        box.remove_class("shown")
        if self.table is not None:
            self.table.focus()

    def filter_open(self) -> bool:
        return self.query_one("#filter", Input).has_class("shown")

    def back(self) -> bool:
        """Esc: close the filter first (clearing it); True when something was closed."""
        if self.filter_open() or self.query_one("#filter", Input).value:
            self._close_filter(keep=False)
            return True
        return False
