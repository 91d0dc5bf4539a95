"""Small modal screens: the `:` command line and the `?` key list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import DataTable, Input, Static


class CommandLine(ModalScreen[str | None]):
    """k9s's `:` prompt: returns the command typed (or None on Esc)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, commands: Sequence[str], hint: str) -> None:
        super().__init__()
        self.commands = list(commands)
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="command-box"):
            yield Input(placeholder="command", id="command",
                        suggester=SuggestFromList(self.commands, case_sensitive=False))
            yield Static(self.hint, id="command-hint")

    @on(Input.Submitted, "#command")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip().lstrip(":"))


class KeyList(ModalScreen[None]):
    """`?`: every key of the screen below, with what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss(None)", "Close")]

    def __init__(self, title: str, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.keys = list(keys)

    def compose(self) -> ComposeResult:
        with Vertical(id="keys-box"):
            yield Static(f"Keys of {self.title_text}   (Esc closes)", id="keys-title")
            yield DataTable(id="keys", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#keys", DataTable)
        table.add_columns("key", "does")
        for key, what in self.keys:
            table.add_row(key, what)


class Prompt(ModalScreen[str | None]):
    """One line of text asked for (a discard reason, a file name); None on Esc."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, hint: str, value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(id="form-box"):
            yield Static(self.title_text, id="form-title")
            yield Input(self.value, id="answer")
            yield Static(self.hint, classes="hint")
            yield Static("", id="form-error")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    @on(Input.Submitted, "#answer")
    def _submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.query_one("#form-error", Static).update("Type something, or Esc to cancel.")
            return
        self.dismiss(event.value.strip())
