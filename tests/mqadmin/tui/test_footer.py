"""The footer shows the keys the screen and its focused widget answer to, composed again
only when they change (mqadmin/tui/widgets/footer.py)."""

from __future__ import annotations

import pytest
from textual.app import ComposeResult
from textual.widgets._footer import FooterKey

from mqadmin.tui.widgets.footer import KeysFooter
from tests.mqadmin.tui.pilot import until
from tests.mqadmin.tui.snapshot_data import SnapshotDashboard, shown


def keys_shown(footer: KeysFooter) -> set[str]:
    return {key.key for key in footer.query(FooterKey)}


def keys_bound(footer: KeysFooter) -> set[str]:
    """The keys bound where the focus is that are shown, and the command palette's."""
    shown = {key for key, b in footer.screen.active_bindings.items() if b.binding.show}
    return shown | {footer.app.COMMAND_PALETTE_BINDING}


async def test_the_footer_follows_the_focus_and_the_screen_and_only_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    composed: list[KeysFooter] = []
    compose = KeysFooter.compose

    def counted(footer: KeysFooter) -> ComposeResult:
        composed.append(footer)
        return compose(footer)

    monkeypatch.setattr(KeysFooter, "compose", counted)
    app = SnapshotDashboard("topics")
    async with app.run_test(size=(150, 40)) as pilot:
        await shown(pilot)
        footer = app.screen.query_one(KeysFooter)
        await until(pilot, lambda: keys_shown(footer) == keys_bound(footer))
        assert "s" in keys_shown(footer)  # the table's sort key, focused
        # mounted empty, then with its keys once: not again at each of the three other
        # times the bindings may have changed while the screen mounted (as Textual's does)
        assert composed == [footer, footer]
        widgets = list(footer.query(FooterKey))

        await pilot.press("ctrl+r")  # a refresh: the same keys, the same widgets
        await shown(pilot)
        assert list(footer.query(FooterKey)) == widgets

        await pilot.press("slash")  # the filter takes the focus: the table's keys go
        await until(pilot, lambda: "s" not in keys_shown(footer))
        assert keys_shown(footer) == keys_bound(footer)
        await pilot.press("escape")
        await until(pilot, lambda: "s" in keys_shown(footer))

        await pilot.press("2")  # another screen, its own footer with its own keys
        await until(pilot, lambda: app.screen.query(KeysFooter)
                    and keys_shown(other := app.screen.query_one(KeysFooter))
                    and keys_shown(other) == keys_bound(other))
