"""The topic form: name, cluster, queues, permission, order; checked with the same
`new_topic_config` the CLI's updateTopic uses before any plan is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from engine.protocol.body.topic import TopicConfig
from mqadmin.exit_codes import CliError
from mqadmin.operations import topic as topic_ops

PERMS = [("read and write (6)", 6), ("read only (4)", 4), ("write only (2)", 2)]


@dataclass(frozen=True, slots=True)
class TopicRequest:
    config: TopicConfig
    cluster: str


class TopicForm(ModalScreen[TopicRequest | None]):
    """Create (empty name) or update (name given, fixed) a topic on a cluster's masters."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, clusters: list[str], *, topic: str = "", read: int = 8, write: int = 8,
                 perm: int = 6, order: bool = False, cluster: str | None = None) -> None:
        super().__init__()
        self.clusters = clusters or ["DefaultCluster"]
        self.topic = topic
        self.defaults = (read, write, perm, order)
        self.cluster = cluster if cluster in self.clusters else self.clusters[0]

    def compose(self) -> ComposeResult:
        read, write, perm, order = self.defaults
        with Vertical(id="form-box"):
            yield Static(f"Update topic {self.topic}" if self.topic else "Create a topic",
                         id="form-title")
            yield Label("Topic name")
            yield Input(self.topic, id="name", disabled=bool(self.topic),
                        placeholder="letters, digits, _ - % |")
            yield Label("Cluster (every master gets the topic)")
            yield Select([(c, c) for c in self.clusters], value=self.cluster, id="cluster",
                         allow_blank=False)
            with Horizontal(classes="pair"):
                with Vertical():
                    yield Label("Read queues per broker")
                    yield Input(str(read), id="read", type="integer")
                with Vertical():
                    yield Label("Write queues per broker")
                    yield Input(str(write), id="write", type="integer")
            yield Label("Permission")
            yield Select(PERMS, value=perm, id="perm", allow_blank=False)
            yield Checkbox("Ordered (also writes the order conf to the name servers)",
                           order, id="order")
            yield Static("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button("Plan", variant="primary", id="plan")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#read" if self.topic else "#name", Input).focus()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#plan")
    def _plan(self) -> None:
        error = self.query_one("#form-error", Static)
        try:
            read = int(self.query_one("#read", Input).value or "0")
            write = int(self.query_one("#write", Input).value or "0")
            config = topic_ops.new_topic_config(
                self.query_one("#name", Input).value, read=read, write=write,
                perm=int(self.query_one("#perm", Select).value),  # type: ignore[arg-type]
                order=self.query_one("#order", Checkbox).value, unit=False,
                has_unit_sub=False)
        except ValueError:
            error.update("Queue numbers must be whole numbers.")
            return
        except CliError as exc:
            error.update(str(exc))
            return
        self.dismiss(TopicRequest(config, str(self.query_one("#cluster", Select).value)))
