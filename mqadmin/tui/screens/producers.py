"""Producers: a producer group's online clients (language, version, address), as
`mqadmin producerConnection` reads them from the brokers of a topic the group sends to."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from engine.client.admin import MQAdmin
from mqadmin.tui.data.message_search import topic_names
from mqadmin.tui.data.producers import ProducersView, read_producers
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import Col, RowTable

HINT = "g choose the producer group and a topic it sends to"


class ProducerForm(ModalScreen[tuple[str, str] | None]):
    """Asks for the producer group and a topic (producers heartbeat to its brokers)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, group: str, topic: str, topics: list[str]) -> None:
        super().__init__()
        self.group = group
        self.topic = topic
        self.topics = topics

    def compose(self) -> ComposeResult:
        with Vertical(id="form-box"):
            yield Static("A producer group's online clients", id="form-title")
            yield Label("Producer group")
            yield Input(self.group, id="group", placeholder="producer group")
            yield Label("A topic the group sends to (its brokers are asked)")
            yield Input(self.topic, id="topic", placeholder="topic",
                        suggester=SuggestFromList(self.topics, case_sensitive=True))
            yield Static("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button("Show", variant="primary", id="show")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#group", Input).focus()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#show")
    def _show(self) -> None:
        group = self.query_one("#group", Input).value.strip()
        topic = self.query_one("#topic", Input).value.strip()
        if not group or not topic:
            self.query_one("#form-error", Static).update("Name both the group and a topic.")
            return
        self.dismiss((group, topic))


class ProducersScreen(DashScreen):
    TITLE: ClassVar[str] = "Producers"
    REFRESH_EVERY: ClassVar[float] = 10.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "choose", "Producer group")]

    def __init__(self) -> None:
        super().__init__()
        self.group = ""
        self.topic = ""
        self.topics: list[str] = []

    def body(self) -> ComposeResult:
        yield RowTable([Col("clientId", "client id"), Col("clientAddr", "address"),
                        Col("language", "language"), Col("version", "version"),
                        Col("protocol", "protocol")],
                       key=lambda r: str(r["clientId"]), sort_by="clientId", id="producers")
        yield Static(HINT, id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> ProducersView | list[str]:
        if not self.group:
            return await topic_names(admin)
        return await read_producers(admin, self.group, self.topic)

    def present(self, data: ProducersView | list[str]) -> None:
        if isinstance(data, list):
            self.topics = data
            return
        if (data.group, data.topic) != (self.group, self.topic):
            return  # read before another group was chosen
        self.query_one(RowTable).show(data.rows)
        n = len(data.rows)
        text = (f"No online client: {data.none}" if data.none else
                f"{n} online client{'s' if n != 1 else ''} of producer group {data.group} "
                f"(asked the brokers of {data.topic}).")
        self.query_one("#summary", Static).update(f"{text}\n{HINT}")

    def action_choose(self) -> None:
        self.app.push_screen(ProducerForm(self.group, self.topic, self.topics), self._chosen)

    def _chosen(self, choice: tuple[str, str] | None) -> None:
        if choice is None:
            return
        self.group, self.topic = choice
        self.query_one(RowTable).show([])
        self.query_one("#summary", Static).update(
            f"Reading the clients of {self.group}…  {HINT}")
        self.action_refresh_now()
