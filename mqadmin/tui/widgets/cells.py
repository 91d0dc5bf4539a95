"""Cell styles shared by the screens: roles, verdicts, yes/no, sizes."""

from __future__ import annotations

from typing import Any

from rich.text import Text

ROLE_STYLES = {"MASTER": "bold green", "ASYNC_MASTER": "bold green",
               "SYNC_MASTER": "bold green", "SLAVE": "cyan", "DOWN": "bold white on red"}
#: A group's verdict (the lag contract's GroupStatus).
VERDICT_STYLES = {"OK": "green", "UNKNOWN": "dim", "WARNING": "bold yellow", "ERROR": "bold red"}


def styled(value: Any, styles: dict[str, str]) -> Text | str:
    if value is None:
        return ""
    text = str(value)
    style = styles.get(text) or next((s for k, s in styles.items() if text.startswith(k)), "")
    return Text(text, style=style) if style else text


def role(value: Any) -> Text | str:
    return styled(value, ROLE_STYLES)


def verdict(value: Any) -> Text | str:
    return styled(value, VERDICT_STYLES)


def flag(value: Any, bad_when: bool = False) -> Text | str:
    """yes/no, red when it has the bad value."""
    if value is None:
        return ""
    text = "yes" if value else "no"
    return Text(text, style="bold red") if bool(value) == bad_when else text


def count(value: Any, warn: int = 1) -> Text | str:
    """A number, yellow from `warn` on."""
    if value is None:
        return ""
    text = f"{value:,}" if isinstance(value, int) else str(value)
    return Text(text, style="bold yellow") if isinstance(value, int) and value >= warn else text
