"""The Messages screen's search form: a topic over a store-time range, a key in a topic, or
an id (either kind) — one form, its fields by what is searched."""

from __future__ import annotations

import re
import time
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from mqadmin.exit_codes import CliError
from mqadmin.operations.times import parse_timestamp
from mqadmin.tui.data.message_search import IdSearch, KeySearch, Search, TopicSearch

TIME_FORMS = "empty, now, 15m / 2h / 1d (that long ago), 2026-05-01T12:00:00, " \
             "yyyy-MM-dd#HH:mm:ss:SSS or ms since the epoch"
#: "2h": that long before now.
AGO = re.compile(r"^(\d+)\s*(s|m|min|h|d)(\s+ago)?$")
UNIT_MS = {"s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
TITLES = {"topic": "Messages of a topic, newest first", "key": "Messages by key",
          "id": "A message by its id"}


def parse_when(text: str) -> int | None:
    """A point in time as the form takes it (see TIME_FORMS); None when empty.

    Raises:
        UsageProblem: none of those forms.
    """
    text = text.strip()
    if not text:
        return None
    ago = AGO.match(text)
    if ago:
        return int(time.time() * 1000) - int(ago.group(1)) * UNIT_MS[ago.group(2)]
    return parse_timestamp(text)


class SearchForm(ModalScreen[Search | None]):
    """Asks what to search: `kind` is "topic", "key" or "id"; `last` fills the fields."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, kind: str, topics: list[str], last: dict[str, str]) -> None:
        super().__init__()
        self.kind = kind
        self.topics = topics
        self.last = last

    def compose(self) -> ComposeResult:
        last = self.last
        topic = Input(last.get("topic", ""), id="topic", placeholder="topic",
                      suggester=SuggestFromList(self.topics, case_sensitive=True))
        with Vertical(id="form-box"):
            yield Static(TITLES[self.kind], id="form-title")
            if self.kind == "id":
                yield Label("Message id (msgId) or offset message id (offsetMsgId)")
                yield Input(last.get("id", ""), id="id", placeholder="32 or 56 hex digits")
                yield Label("Topic (optional: without it every topic is searched)")
                yield topic
            else:
                yield Label("Topic")
                yield topic
            if self.kind == "key":
                yield Label("Key (a KEYS value the producer set)")
                yield Input(last.get("key", ""), id="key", placeholder="key")
            if self.kind == "topic":
                with Horizontal(classes="pair"):
                    with Vertical():
                        yield Label("Stored from")
                        yield Input(last.get("from", ""), id="from",
                                    placeholder="empty: the oldest")
                    with Vertical():
                        yield Label("Stored until")
                        yield Input(last.get("until", ""), id="until",
                                    placeholder="empty: now")
                yield Static(f"Times: {TIME_FORMS} (local time). The newest page comes "
                             "first; n shows older ones.", classes="hint")
            yield Static("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button("Search", variant="primary", id="search")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        first = {"id": "#id", "key": "#key" if self.last.get("topic") else "#topic"}
        self.query_one(first.get(self.kind, "#topic"), Input).focus()

    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value.strip()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#search")
    def _search(self) -> None:
        error = self.query_one("#form-error", Static)
        topic = self._value("topic")
        if self.kind == "id":
            if not self._value("id"):
                error.update("Type the id (either kind), or Esc to cancel.")
                return
            self.dismiss(IdSearch(self._value("id"), topic or None))
            return
        if not topic:
            error.update("Name the topic.")
            return
        if self.kind == "key":
            if not self._value("key"):
                error.update("Type the key.")
                return
            self.dismiss(KeySearch(topic, self._value("key")))
            return
        try:
            begin = parse_when(self._value("from"))
            end = parse_when(self._value("until"))
        except CliError as exc:
            error.update(str(exc))
            return
        if begin is not None and end is not None and begin > end:
            error.update("'Stored from' is after 'Stored until'.")
            return
        self.dismiss(TopicSearch(topic, begin, end))
