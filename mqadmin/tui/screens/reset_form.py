"""The reset-offsets form: which topic of the group, and to when (read as the CLI's
resetOffsetByTime reads it: `now` is the end of the queue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from engine.client.admin.broker import RESET_TO_MAX
from mqadmin.exit_codes import CliError
from mqadmin.operations.times import parse_timestamp


@dataclass(frozen=True, slots=True)
class ResetRequest:
    topic: str
    timestamp: int  # ms, or RESET_TO_MAX


class ResetForm(ModalScreen[ResetRequest | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, group: str, topics: list[str]) -> None:
        super().__init__()
        self.group = group
        self.topics = topics

    def compose(self) -> ComposeResult:
        with Vertical(id="form-box"):
            yield Static(f"Reset the offsets of {self.group}", id="form-title")
            yield Label("Topic")
            yield Select([(t, t) for t in self.topics], value=self.topics[0], id="topic",
                         allow_blank=False)
            yield Label("To the first message stored at or after")
            yield Input("now", id="when",
                        placeholder="now | ms since epoch | 2024-05-01T12:00:00 | "
                                    "yyyy-MM-dd#HH:mm:ss:SSS")
            yield Static("'now' skips the whole backlog (to the end of every queue).",
                         classes="hint")
            yield Static("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button("Plan", variant="primary", id="plan")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#when", Input).focus()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#plan")
    def _plan(self) -> None:
        when = self.query_one("#when", Input).value.strip()
        try:
            ms = RESET_TO_MAX if when == "now" else parse_timestamp(when)
        except CliError as exc:
            self.query_one("#form-error", Static).update(str(exc))
            return
        self.dismiss(ResetRequest(str(self.query_one("#topic", Select).value), ms))
