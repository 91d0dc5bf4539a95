"""Small modal screens: the `:` command line, the `?` key list, a one-line prompt and a
choice from a list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from mqadmin.tui.keys import KeySection


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


def _key_grid(keys: Sequence[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", min_width=14)
    grid.add_column()
    for key, what in keys:
        grid.add_row(key, what)
    return grid


class KeyList(ModalScreen[None]):
    """`?`: the keys of the screen below, what this screen can do first (as k9s lists them),
    in sections (mqadmin/tui/keys.py)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss(None)", "Close")]

    def __init__(self, title: str, sections: Sequence[KeySection]) -> None:
        super().__init__()
        self.title_text = title
        self.sections = list(sections)

    def compose(self) -> ComposeResult:
        with Vertical(id="keys-box"):
            yield Static(f"Keys of {self.title_text}   (Esc closes)", id="keys-title")
            with VerticalScroll(id="keys"):
                for section in self.sections:
                    yield Static(section.title, classes="keys-heading")
                    yield Static(_key_grid(section.keys), classes="keys-list")

    def on_mount(self) -> None:
        self.query_one("#keys", VerticalScroll).focus()


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


class Pick(ModalScreen[str | None]):
    """One of a few choices (a group, a client), each an id and what the list shows; None
    on Esc."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, hint: str, choices: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        with Vertical(id="form-box"):
            yield Static(self.title_text, id="form-title")
            yield OptionList(*(Option(label, id=key) for key, label in self.choices),
                             id="choices")
            yield Static(self.hint, classes="hint")

    def on_mount(self) -> None:
        self.query_one("#choices", OptionList).focus()

    @on(OptionList.OptionSelected, "#choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
