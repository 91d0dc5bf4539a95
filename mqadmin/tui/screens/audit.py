"""Audit: the audit log, newest first (read as `mqadmin audit` reads it, history.records);
Enter shows a record's arguments, plan and result."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin import history
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.cells import styled
from mqadmin.tui.widgets.table import Col, RowTable

Row = dict[str, Any]
LIMIT = 500
OUTCOME_STYLES = {"applied": "green", "partial": "bold yellow", "unverified": "bold yellow",
                  "failed": "bold red"}


class AuditScreen(DashScreen):
    TITLE: ClassVar[str] = "Audit log"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Plan & result", show=False)]

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("id", "id"), Col("at", "at (UTC)"), Col("who", "who"),
            Col("context", "context"), Col("command", "command"), Col("target", "target"),
            Col("outcome", "outcome", lambda v: styled(v, OUTCOME_STYLES)),
            Col("exitCode", "exit"), Col("via", "via"),
        ], key=lambda r: str(r["id"]), sort_by="id", reverse=True, id="audit")
        yield Static(f"The last {LIMIT} changes made by mqadmin and the dashboard "
                     f"({history.db_path()}).  Enter: arguments, plan and result.",
                     classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[Row]:
        return await self.dashboard.backend.blocking(
            lambda: history.records(limit=LIMIT, detail=True))

    def present(self, data: list[Row]) -> None:
        self.query_one(RowTable).show(data)

    def action_open(self) -> None:
        row = self.query_one(RowTable).selected
        if row is not None:
            self.app.push_screen(AuditRecordScreen(row))

    def on_data_table_row_selected(self) -> None:
        self.action_open()


class AuditRecordScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close")]

    def __init__(self, record: Row) -> None:
        super().__init__()
        self.record = record

    def compose(self) -> ComposeResult:
        r = self.record
        with VerticalScroll(id="record-box"):
            yield Static(f"#{r['id']} {r['command']} {r['target']} — {r['outcome']} "
                         f"(exit {r['exitCode']})   Esc closes", id="record-title")
            text = "\n".join([
                f"at {r['at']} by {r['who']}, context {r['context'] or '-'}, "
                f"name servers {r['namesrv']}",
                f"message: {r['message'] or '-'}", "",
                "arguments:", json.dumps(r["args"], indent=2, default=str), "",
                "plan:", json.dumps(r["plan"], indent=2, default=str), "",
                "result:", json.dumps(r["result"], indent=2, default=str)])
            yield Static(text, id="record-text", markup=False)
