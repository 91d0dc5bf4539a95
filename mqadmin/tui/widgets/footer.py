"""The key line at the foot of every screen: Textual's footer, composed again only when the
keys it shows change.

Textual composes its footer anew (a widget for each key, its styles worked out again) every
time the screen's bindings may have changed: at each focus change, refresh and screen switch.
On our screens five of six such times show the same keys; that work was a seventh of the
dashboard's CPU when moving between screens."""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer


class KeysFooter(Footer):
    _shown: Any = None  # what the last composition showed

    async def recompose(self) -> None:
        if not self.is_attached:
            return
        shown = (self._bindings_ready, self.show_command_palette, self.combine_groups,
                 [(key, b.binding, b.enabled, b.tooltip)
                  for key, b in self.screen.active_bindings.items()])
        if shown == self._shown:
            return
        self._shown = shown
        await super().recompose()
