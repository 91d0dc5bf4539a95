"""One message: where it is stored, its properties, its body (text, JSON pretty-printed, or
hex), whether each group consuming its topic consumed it, its trace as a timeline (sent,
stored, each group's delivery and consumption with status, client and cost); consume it
directly on one online client, resend it to a group, export it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.exit_codes import message_for
from mqadmin.operations.messages.ids import StoredMessage
from mqadmin.operations.times import format_time
from mqadmin.tui.data.changes import ConsumeDirectlyChange, ResendToGroupChange
from mqadmin.tui.data.message_detail import (
    Body,
    Client,
    MessageView,
    body_of,
    export_message,
    online_clients,
    read_detail,
    where_stored,
)
from mqadmin.tui.events import Searched
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.widgets.cells import styled
from mqadmin.tui.widgets.dialogs import Pick, Prompt
from mqadmin.tui.widgets.table import Col, RowTable

STEP_STYLES = {"success": "green", "failed": "bold red", "COMMIT_MESSAGE": "green",
               "ROLLBACK_MESSAGE": "yellow", "UNKNOW": "yellow"}
TRACK_STYLES = {"CONSUMED": "green", "CONSUMED_BUT_FILTERED": "dim", "NOT_CONSUME_YET":
                "bold yellow", "NOT_ONLINE": "dim", "PULL": "cyan", "UNKNOWN": "yellow"}
KEYS = "h hex/text · c consume directly · r resend to a group · e export · Esc back"


def _grid(pairs: list[tuple[str, str]]) -> Text:
    """Labels (bold) and values in two columns; plain text, never markup."""
    width = max((len(label) for label, _ in pairs), default=0)
    text = Text()
    for i, (label, value) in enumerate(pairs):
        text.append(("\n" if i else "") + label.rjust(width), style="bold")
        text.append(f"  {value}")
    return text


class MessageDetailScreen(DashScreen):
    """A message's detail; the tracks are read again every `REFRESH_EVERY` seconds."""

    REFRESH_EVERY: ClassVar[float] = 10.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("h", "hex", "Hex / text"),
        Binding("c", "consume", "Consume directly"),
        Binding("r", "resend", "Resend to a group"),
        Binding("e", "export", "Export"),
    ]

    def __init__(self, found: StoredMessage, id_kind: str | None = None) -> None:
        super().__init__()
        self.found = found
        self.id_kind = id_kind
        self.body_view: Body = body_of(found.record.body)
        self.hex = False
        self.groups: list[str] = []
        self.exported: Path | None = None  # the file the last export wrote

    def heading(self) -> str:
        record = self.found.record
        return f"Message {record.msg_id} in {record.topic}  (Esc: back)"

    def body(self) -> ComposeResult:
        record = self.found.record
        found_by = f"Found by its {self.id_kind}.  " if self.id_kind else ""
        with Horizontal(id="message-panes"):
            with VerticalScroll(id="message-facts"):
                yield Static("Where it is stored", classes="section")
                yield Static(_grid(where_stored(self.found)), id="stored")
                yield Static("Properties", classes="section")
                props = sorted(record.properties().items())
                yield Static(_grid([(k, v) for k, v in props]) if props else "none",
                             id="properties")
            with VerticalScroll(id="message-body"):
                yield Static("", id="body-title", classes="section")
                yield Static("", id="body-text", markup=False)
        with Horizontal(id="message-history"):
            with Vertical(id="tracks-pane"):
                yield Static("Groups of the topic: consumed?", classes="section")
                yield RowTable([Col("group", "group"),
                                Col("status", "status", lambda v: styled(v, TRACK_STYLES))],
                               key=lambda r: str(r["group"]), sort_by="group", id="tracks")
            with Vertical(id="timeline-pane"):
                yield Static("Trace", id="timeline-title", classes="section")
                yield RowTable([Col("time", "time", sort_on="n"), Col("step", "step"),
                                Col("group", "group"), Col("client", "client"),
                                Col("status", "status", lambda v: styled(v, STEP_STYLES)),
                                Col("cost", "cost ms")],
                               key=lambda r: str(r["n"]), sort_by="time", id="timeline")
                yield Static("", id="timeline-note", markup=False)
        yield Static(f"{found_by}{KEYS}", id="summary", classes="panel")

    def on_mount(self) -> None:
        self._show_body()

    async def fetch(self, admin: MQAdmin) -> MessageView:
        return await read_detail(admin, self.found)

    def present(self, view: MessageView) -> None:
        self._show_timeline(view)
        data = view.detail
        tracks = data.tracks or ()
        self.groups = [t.group for t in tracks]
        self.query_one(RowTable).show([{"group": t.group, "status": t.status}
                                       for t in tracks])
        if data.tracks is None:
            text = "The broker could not say which groups consume the topic."
        elif not tracks:
            text = "No group consumes the topic."
        else:
            consumed = sum(1 for t in tracks if t.status == "CONSUMED")
            text = f"{consumed} of {len(tracks)} groups consumed it."
        found_by = f"Found by its {self.id_kind}.  " if self.id_kind else ""
        self.query_one("#summary", Static).update(f"{found_by}{text}\n{KEYS}")

    def _show_timeline(self, view: MessageView) -> None:
        steps = view.timeline.steps
        self.query_one("#timeline", RowTable).show([
            {"n": n, "time": format_time(s.at), "step": s.step, "group": s.group,
             "client": s.client, "status": s.status, "cost": s.cost_ms}
            for n, s in enumerate(steps)])
        traced = any(s.step not in ("sent", "stored") or s.status for s in steps)
        self.query_one("#timeline-title", Static).update(
            "Trace" if traced else "Trace (not traced: the message's own times)")
        self.query_one("#timeline-note", Static).update(view.timeline.note)

    # ------------------------------------------------------------------ body

    def _show_body(self) -> None:
        view = self.body_view
        if self.hex:
            kind, text = "hex", view.hex
        elif view.json is not None:
            kind, text = "JSON, pretty-printed", view.json
        else:
            kind, text = "text, UTF-8", view.text
        other = "text" if self.hex else "hex"
        self.query_one("#body-title", Static).update(
            f"Body ({kind}, {view.size:,} bytes; h: {other})")
        self.query_one("#body-text", Static).update(text or "(empty)")

    def action_hex(self) -> None:
        self.hex = not self.hex
        self._show_body()

    # ------------------------------------------------------------------ changes

    def action_consume(self) -> None:
        if not self.dashboard.allow_change("consuming a message directly"):
            return
        if not self.groups:
            self.notify("No group consumes this topic, so no client can be handed the "
                        "message.", severity="warning")
            return
        self.find_clients(list(self.groups))

    @work(exclusive=True, group="clients")
    async def find_clients(self, groups: list[str]) -> None:
        try:
            clients = await self.dashboard.backend.call(
                lambda admin: online_clients(admin, groups))
        except Exception as exc:
            self.post_message(Searched(None, message_for(exc)))
            return
        self.post_message(Searched(clients))

    def on_searched(self, message: Searched) -> None:
        message.stop()
        if message.error:
            self.notify(message.error, severity="error")
            return
        clients: list[Client] = message.data
        if not clients:
            self.notify(f"No consumer of {', '.join(self.groups)} is online: start one, or "
                        "resend the message to a group (r).", severity="warning")
            return
        by_id = {f"{c.group}\t{c.client_id}": c for c in clients}

        def picked(choice: str | None) -> None:
            if choice is None:
                return
            client = by_id[choice]
            record = self.found.record
            change = ConsumeDirectlyChange(
                client.group, client.client_id, [record.offset_msg_id], record.topic,
                {"msg_id": record.offset_msg_id, "group": client.group,
                 "client_id": client.client_id, "topic": record.topic})
            self.app.push_screen(ChangeScreen(
                change, f"consumeMessageDirectly {record.msg_id} on {client.client_id} "
                        f"({client.group})"), lambda _: self.action_refresh_now())

        self.app.push_screen(Pick(
            "Hand the message to which online consumer?",
            "Its listener consumes it; nothing is committed and no other client sees it. "
            "Enter picks, Esc cancels.",
            [(k, f"{c.group}  {c.client_id}  {c.addr}  {c.language} {c.version}")
             for k, c in by_id.items()]), picked)

    def action_resend(self) -> None:
        if not self.dashboard.allow_change("resending a message"):
            return
        record = self.found.record

        def chosen(group: str | None) -> None:
            if not group:
                return
            change = ResendToGroupChange(group, record.offset_msg_id, record.topic,
                                         {"msg_id": record.offset_msg_id, "group": group,
                                          "topic": record.topic})
            self.app.push_screen(ChangeScreen(change, f"resendMessage {record.msg_id} to "
                                                      f"%RETRY%{group}"),
                                 lambda _: self.action_refresh_now())

        hint = "A copy goes to the group's retry topic: only that group receives it."
        if self.groups:
            self.app.push_screen(Pick("Resend the message to which group?",
                                      f"{hint} Enter picks, Esc cancels.",
                                      [(g, g) for g in self.groups]), chosen)
        else:
            self.app.push_screen(Prompt("Resend the message to which group?", hint), chosen)

    # ------------------------------------------------------------------ export

    def action_export(self) -> None:
        def named(path: str | None) -> None:
            if path:
                self.export(Path(path))

        self.app.push_screen(Prompt(
            "Export the message to a file", "JSON: every field, the properties, the body "
            f"(text, or base64 when it is not UTF-8). A relative path is under {Path.cwd()}.",
            f"message-{self.found.record.msg_id}.json"), named)

    @work(group="export")
    async def export(self, path: Path) -> None:
        try:
            written = await self.dashboard.backend.blocking(
                lambda: export_message(self.found, path))
        except Exception as exc:
            self.notify(message_for(exc), severity="error")
            return
        self.exported = written.path
        again = " (the file that was there is replaced)" if written.replaced else ""
        self.notify(f"message written to {written.path}{again}")

