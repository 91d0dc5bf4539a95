"""The header line of every screen: context, name servers, cluster health, read-only mode
and the time of the last refresh (all kept by the app, which this widget watches); and how
the health read by tui/data/health.py is drawn."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from mqadmin.tui.data.health import ExtraHealth, Health


def _part(text: Text, label: str, value: str, bad: bool, *, first: bool = False) -> None:
    if not first:
        text.append("  ·  ", style="dim")
    text.append(f"{label} ")
    text.append(value, style="bold red" if bad else "bold green")


def health_line(health: Health) -> Text:
    """Name servers and brokers up, masters without a slave, broker names without a master."""
    text = Text()
    _part(text, "name servers", f"{health.namesrv_up}/{health.namesrv_total} up",
          health.namesrv_up < health.namesrv_total, first=True)
    _part(text, "brokers", f"{health.brokers_up}/{health.brokers_total} up",
          health.brokers_up < health.brokers_total)
    lonely = health.lonely
    _part(text, "masters without a slave", str(len(lonely)) + (
        f" ({', '.join(lonely)})" if lonely else ""), bool(lonely))
    if health.no_master:
        _part(text, "no master", ", ".join(health.no_master), True)
    return text


def extra_line(extra: ExtraHealth) -> Text:
    """Groups in ERROR (or that no collector runs) and unhandled dead letters."""
    text = Text()
    bad = extra.in_error
    if bad is None:
        text.append("  ·  ", style="dim")
        text.append("lag verdicts: no `mqadmin lag collect` for this cluster", style="dim")
    else:
        _part(text, "groups in ERROR", str(len(bad)) + (
            f" ({', '.join(bad[:3])}{'…' if len(bad) > 3 else ''})" if bad else ""), bool(bad))
    _part(text, "unhandled dead letters", f"{extra.dead_letters:,}", extra.dead_letters > 0)
    return text


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
