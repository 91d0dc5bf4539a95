"""One group's dead letters: a table with multi-select, the body viewer (JSON
pretty-printed), and resend / discard / export through the dead-letter operations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.exit_codes import message_for
from mqadmin.operations.dlq.model import Filters
from mqadmin.tui.data.changes import DiscardChange, ResendChange
from mqadmin.tui.data.dlq import export_letters, read_letters
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.widgets.cells import styled
from mqadmin.tui.widgets.dialogs import Prompt
from mqadmin.tui.widgets.table import Col, Row, RowTable

TRIAGE_STYLES = {"unhandled": "bold yellow", "resent": "green", "resending": "cyan",
                 "discarded": "dim"}


class DlqGroupScreen(DashScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "mark", "Select"),
        Binding("a", "mark_all", "Select all shown"),
        Binding("r", "resend('retry')", "Resend (retry)"),
        Binding("t", "resend('topic')", "Resend to topic"),
        Binding("x", "discard", "Discard"),
        Binding("e", "export", "Export"),
        Binding("enter", "view", "Body", show=False),
    ]

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group
        self.marked: set[str] = set()

    def heading(self) -> str:
        return f"Dead letters of {self.group}  (Esc: back)"

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("mark", "✓", of_row=lambda r: "✓" if r["msgId"] in self.marked else ""),
            Col("storeTime", "stored"), Col("originTopic", "original topic"),
            Col("keys", "keys"), Col("tags", "tags"), Col("reconsumeTimes", "retries"),
            Col("inDlq", "in DLQ"), Col("triage", "triage", lambda v: styled(v, TRIAGE_STYLES)),
            Col("msgId", "message id"), Col("preview", "body"),
        ], key=lambda r: str(r["msgId"]), sort_by="storeTime", id="letters")
        yield Static("", id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[Row]:
        return await read_letters(admin, self.dashboard.backend.endpoint, self.group)

    def present(self, data: list[Row]) -> None:
        self.marked &= {str(r["msgId"]) for r in data}
        self.query_one(RowTable).show(data)
        self._summarise()

    def _summarise(self) -> None:
        rows = self.query_one(RowTable).all_rows
        unhandled = sum(1 for r in rows if r["triage"] == "unhandled")
        chosen = f"{len(self.marked)} selected" if self.marked else "none selected: actions " \
            "apply to every dead letter shown"
        self.query_one("#summary", Static).update(
            f"{len(rows)} dead letters, {unhandled} unhandled; {chosen}.  space select · "
            "a select all shown · Enter body · r resend to %RETRY% · t resend to the "
            "original topic · x discard · e export")

    # ------------------------------------------------------------------ selection

    def action_mark(self) -> None:
        table = self.query_one(RowTable)
        key = table.selected_key
        if key is None:
            return
        self.marked ^= {key}
        table.show(table.all_rows)
        self._summarise()
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def action_mark_all(self) -> None:
        table = self.query_one(RowTable)
        shown = {str(r["msgId"]) for r in table.shown_rows()}
        self.marked = set() if shown <= self.marked else self.marked | shown
        table.show(table.all_rows)
        self._summarise()

    def chosen(self) -> frozenset[str] | None:
        """The selected message ids; else those shown when filtered; else None (all)."""
        if self.marked:
            return frozenset(self.marked)
        table = self.query_one(RowTable)
        if table.filter_text:
            return frozenset(str(r["msgId"]) for r in table.shown_rows())
        return None

    # ------------------------------------------------------------------ actions

    def action_view(self) -> None:
        row = self.query_one(RowTable).selected
        if row is not None:
            self.app.push_screen(LetterScreen(row))

    def on_data_table_row_selected(self) -> None:
        self.action_view()

    def _done(self, _: object) -> None:
        self.marked.clear()
        self.action_refresh_now()

    def action_resend(self, to: str) -> None:
        if not self.dashboard.allow_change("resending dead letters"):
            return
        change = ResendChange(self.group, Filters(ids=self.chosen()), to=to)
        where = "%RETRY%" + self.group if to == "retry" else "the original topics"
        self.app.push_screen(ChangeScreen(change, f"dlq resend {self.group} to {where}"),
                             self._done)

    def action_discard(self) -> None:
        if not self.dashboard.allow_change("discarding dead letters"):
            return
        ids = self.chosen()

        def reasoned(reason: str | None) -> None:
            if reason:
                discard = DiscardChange(self.group, reason, Filters(ids=ids))
                self.app.push_screen(ChangeScreen(discard, f"dlq discard {self.group}"),
                                     self._done)

        self.app.push_screen(Prompt("Why do these dead letters need no resend?",
                                    "Kept in the ledger with the batch; nothing is deleted."),
                             reasoned)

    def action_export(self) -> None:
        ids = self.chosen()

        def named(path: str | None) -> None:
            if path:
                self.export(ids, Path(path).expanduser())

        self.app.push_screen(Prompt("Export to a JSON Lines file", "Every property, the body "
                                    "exactly; `mqadmin dlq import` reads it back.",
                                    f"{self.group}-dead-letters.jsonl"), named)

    @work(group="export")
    async def export(self, ids: frozenset[str] | None, path: Path) -> None:
        try:
            n = await self.dashboard.backend.call(
                lambda admin: export_letters(admin, self.group, ids, path))
        except Exception as exc:
            self.notify(message_for(exc), severity="error")
            return
        self.notify(f"{n} dead letters written to {path}")


class LetterScreen(ModalScreen[None]):
    """One dead letter: every field, its properties, and its body (JSON pretty-printed)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close")]

    def __init__(self, row: Row) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        r = self.row
        fields = ("msgId", "offsetMsgId", "originTopic", "originMsgId", "keys", "tags",
                  "reconsumeTimes", "bornTime", "storeTime", "inDlq", "triage", "brokerName",
                  "queueId", "queueOffset", "bodySize")
        head = "\n".join(f"{f:>15}  {r.get(f)}" for f in fields)
        props = json.dumps(r.get("properties") or {}, indent=2, ensure_ascii=False)
        with VerticalScroll(id="record-box"):
            yield Static(f"Dead letter {r['msgId']}   (Esc closes)", id="record-title")
            yield Static(f"{head}\n\nproperties:\n{props}\n\nbody:\n{r.get('body')}",
                         markup=False, id="record-text")
