"""The header line of every screen: context, name servers, cluster health, read-only mode
and the time of the last refresh (all kept by the app, which this widget watches)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusHeader(Static):
    """Redrawn whenever the app's health, refresh time or context changes."""

    def on_mount(self) -> None:
        for name in ("health", "refreshed_at", "where", "readonly"):
            self.watch(self.app, name, self._redraw, init=False)
        self._redraw()

    def _redraw(self, _: object = None) -> None:
        app = self.app
        text = Text()
        text.append(" mqadmin ", style="bold reverse")
        text.append(f"  {getattr(app, 'where', '')}", style="bold")
        if getattr(app, "readonly", False):
            text.append("  READ-ONLY: changes are disabled ", style="bold black on yellow")
        at = getattr(app, "refreshed_at", "")
        if at:
            text.append(f"   refreshed {at}", style="dim")
        health: Text | str = getattr(app, "health", "")
        text.append("\n ")
        text.append_text(health if isinstance(health, Text) else Text(health))
        self.update(text)
