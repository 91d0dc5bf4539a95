"""Dead letters: every group with dead letters (total, unhandled, growth, top topics) and
the resend and discard batches with how many of their copies were consumed since."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.tui.data.dlq import DlqView, read_dlq
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.dlq_group import DlqGroupScreen
from mqadmin.tui.widgets.cells import count
from mqadmin.tui.widgets.table import Col, RowTable


class DlqScreen(DashScreen):
    TITLE: ClassVar[str] = "Dead letters"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Messages", show=False)]

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("group", "group"), Col("deadLetters", "dead letters"),
            Col("unhandled", "unhandled", count), Col("lastHour", "last hour", count),
            Col("lastDay", "last day"), Col("oldest", "oldest"), Col("newest", "newest"),
            Col("topTopics", "top original topics"), Col("errors", "errors"),
        ], key=lambda r: str(r["group"]), sort_by="unhandled", reverse=True, id="dlq-groups")
        yield Static("Resend and discard batches (newest first)", classes="section")
        yield RowTable([
            Col("batch", "batch"), Col("group", "group"), Col("action", "action"),
            Col("target", "to"), Col("at", "at (UTC)"), Col("total", "total"),
            Col("sent", "sent"), Col("failed", "failed", count), Col("unsent", "unsent", count),
            Col("consumed", "consumed"), Col("pending", "pending", count),
            Col("backInDlq", "back in DLQ", count), Col("reason", "reason"),
        ], key=lambda r: str(r["batch"]), sort_by="at", reverse=True, id="dlq-batches")
        yield Static("Enter: the group's dead letters (view, select, resend, discard, "
                     "export) · / filter · s sort", classes="panel")

    async def fetch(self, admin: MQAdmin) -> DlqView:
        return await read_dlq(admin, self.dashboard.backend.endpoint)

    def present(self, data: DlqView) -> None:
        self.query_one("#dlq-groups", RowTable).show(data.groups)
        self.query_one("#dlq-batches", RowTable).show(data.batches)

    def action_open(self) -> None:
        row = self.query_one("#dlq-groups", RowTable).selected
        if row is not None:
            self.app.push_screen(DlqGroupScreen(str(row["group"])))

    def on_data_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.data_table.id == "dlq-groups":
            self.action_open()
