"""The topic form: name, cluster, queues, permission, order, message type; checked with the
same `new_topic_config` the CLI's updateTopic uses before any plan is made.  The message type
becomes updateTopic's `-a +message.type=...` (only when it is set or changed, so the form
still works against RocketMQ 4.x brokers, which keep no attributes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from engine.protocol import attributes as attrs
from engine.protocol.body.topic import TopicConfig
from mqadmin.exit_codes import CliError
from mqadmin.operations import topic as topic_ops
from mqadmin.operations.topic_attributes import MESSAGE_TYPES

PERMS = [("read and write (6)", 6), ("read only (4)", 4), ("write only (2)", 2)]
#: The message type select's value when none is set (or, updating, none is to be set).
UNSET = "-"


@dataclass(frozen=True, slots=True)
class TopicRequest:
    config: TopicConfig
    cluster: str
    #: Attribute changes in Apache's signed form (`{"+message.type": "FIFO"}`), or none.
    attributes: dict[str, str] = field(default_factory=dict)


class TopicForm(ModalScreen[TopicRequest | None]):
    """Create (empty name) or update (name given, fixed) a topic on a cluster's masters."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, clusters: list[str], *, topic: str = "", read: int = 8, write: int = 8,
                 perm: int = 6, order: bool = False, cluster: str | None = None,
                 message_type: str | None = None) -> None:
        super().__init__()
        self.clusters = clusters or ["DefaultCluster"]
        self.topic = topic
        self.defaults = (read, write, perm, order)
        self.cluster = cluster if cluster in self.clusters else self.clusters[0]
        known = {t.value for t in MESSAGE_TYPES}
        self.message_type = message_type if message_type in known else UNSET

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
            yield Label("Message type (RocketMQ 5 clients check it; 4.x brokers keep none)")
            unset = "unchanged" if self.topic else "not set (NORMAL to 5.x clients)"
            yield Select([(unset, UNSET), *((t.value, t.value) for t in MESSAGE_TYPES)],
                         value=self.message_type if self.topic else UNSET, id="type",
                         allow_blank=False)
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
        chosen = str(self.query_one("#type", Select).value)
        changes = ({} if chosen in (UNSET, self.message_type)
                   else {attrs.ADD + attrs.MESSAGE_TYPE.name: chosen})
        self.dismiss(TopicRequest(config, str(self.query_one("#cluster", Select).value),
                                  changes))
