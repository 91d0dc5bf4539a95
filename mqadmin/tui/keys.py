"""What `?` lists: the keys of the screen shown, grouped as k9s does — what this screen can
do first, then the keys that work everywhere in the dashboard, then Textual's generic keys
(cursor, focus, copy) last.

How this works: a key is the screen's own when one of the dashboard's classes declares it
(the screen, its base, or a focused widget such as the sortable table); the app's own
`BINDINGS` are the "everywhere" keys; whatever else is active comes from Textual itself.
The screen's keys are listed even where a Textual widget binds the same key first (Enter
selects the table's row, and the screen opens it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

#: The prefix of the dashboard's own modules (a class declared there is "ours").
OURS = "mqadmin."


@dataclass(frozen=True, slots=True)
class KeySection:
    """A heading and its keys, each as (key, what it does)."""

    title: str
    keys: tuple[tuple[str, str], ...]


def _declared(node: DOMNode) -> list[Binding]:
    """The bindings the dashboard's own classes of `node` declare, most derived first."""
    found: list[Binding] = []
    for cls in type(node).__mro__:
        if cls.__module__.startswith(OURS) and "BINDINGS" in vars(cls):
            found.extend(Binding.make_bindings(vars(cls)["BINDINGS"]))
    return found


def _label(binding: Binding) -> str:
    return binding.key_display or binding.key


def _pick(bindings: Iterable[Binding], seen: set[str]) -> tuple[tuple[str, str], ...]:
    keys: list[tuple[str, str]] = []
    for b in bindings:
        label = _label(b)
        if b.description and label not in seen:
            seen.add(label)
            keys.append((label, b.description))
    return tuple(keys)


def key_sections(app: App[Any], screen: Screen[Any], title: str) -> list[KeySection]:
    """The screen's own keys under its title, the app's under "Everywhere", the rest of the
    active bindings under "Cursor, focus and copy" (empty sections left out)."""
    focused = screen.focused
    widgets = [] if focused is None else [
        n for n in focused.ancestors_with_self if n is not screen and n is not app
        and not isinstance(n, (Screen, App))]
    seen: set[str] = set()
    own = _pick([*_declared(screen), *(b for w in widgets for b in _declared(w))], seen)
    everywhere = _pick(_declared(app), seen)
    generic = _pick((a.binding for a in screen.active_bindings.values()), seen)
    sections = [KeySection(title, own), KeySection("Everywhere", everywhere),
                KeySection("Cursor, focus and copy", generic)]
    return [s for s in sections if s.keys]
