"""The change dialog: plan (read, nothing changes), confirmation, apply with live steps,
and the verified result — the CLI's plan / confirm / apply / verify flow on screen.

How this works: the dialog plans as soon as it opens (a worker awaits `Change.plan` on the
backend); `y` applies, `n` or Esc cancels.  A plan with a `risk` (a failover's estimated
loss) needs `A` (accept the loss) before `y` does anything.  While it applies, every step
the operation reports (a switchover's timeline, servers done) is appended as it happens;
then the verified rows and the outcome are shown, and the dialog returns the `Outcome`.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from mqadmin.exit_codes import message_for
from mqadmin.tui.data.changes import Change, Outcome, PlanView
from mqadmin.tui.messages import Step
from mqadmin.tui.widgets.table import Row, plain


def fill(table: DataTable[object], rows: list[Row], columns: tuple[str, ...]) -> None:
    """Put `rows` in a plain table (columns in the given order)."""
    table.clear(columns=True)
    cols = columns or (tuple(rows[0]) if rows else ())
    table.add_columns(*cols)
    for row in rows:
        table.add_row(*(plain(row.get(c)) for c in cols))


class ChangeScreen(ModalScreen[Outcome | None]):
    """Plan, confirm, apply and verify one change."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "apply", "Apply"),
        Binding("A", "accept", "Accept the loss", show=False),
        Binding("n,escape", "close", "Cancel / close"),
    ]

    def __init__(self, change: Change, title: str) -> None:
        super().__init__()
        self.change = change
        self.title_text = title
        self.plan_view: PlanView | None = None
        self.accepted = False
        self.state = "planning"  # planning, planned, applying, done, failed
        self.outcome: Outcome | None = None
        self.steps: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="change-box"):
            yield Static(self.title_text, id="change-title")
            with VerticalScroll(id="change-body"):
                yield Static("Planning: reading the servers (nothing changes)…",
                             id="change-status")
                yield DataTable(id="plan", show_cursor=False)
                yield DataTable(id="details", show_cursor=False)
                yield Static("", id="risk")
                yield Static("", id="steps")
                yield DataTable(id="result", show_cursor=False)
            yield Static("", id="change-prompt")

    def on_mount(self) -> None:
        for name in ("details", "result"):
            self.query_one(f"#{name}", DataTable).display = False
        self.plan_it()

    @work(exclusive=True, group="change")
    async def plan_it(self) -> None:
        try:
            view = await self.change.plan(self.app.backend)  # type: ignore[attr-defined]
        except Exception as exc:
            self.state = "failed"
            self._status(f"Planning failed, nothing was changed: {message_for(exc)}", "error")
            self._prompt("Esc closes.")
            return
        self.plan_view = view
        self.state = "planned"
        fill(self.query_one("#plan", DataTable), view.rows, view.columns)
        if view.details:
            details = self.query_one("#details", DataTable)
            details.display = True
            fill(details, view.details, view.detail_columns)
        self._status(f"Plan of {self.change.action} {self.change.target} (nothing changed yet):",
                     "")
        if view.risk:
            self.query_one("#risk", Static).update(f"⚠ {view.risk}")
            self._prompt("Press A to accept this loss, then y to apply; n or Esc cancels.")
        else:
            self._prompt("Apply? y applies, n or Esc cancels.")

    def action_accept(self) -> None:
        if self.state == "planned" and self.plan_view is not None and self.plan_view.risk:
            self.accepted = True
            self.query_one("#risk", Static).update(f"⚠ {self.plan_view.risk}\n  Loss accepted.")
            self._prompt("Loss accepted. y applies, n or Esc cancels.")

    def action_apply(self) -> None:
        if self.state != "planned" or self.plan_view is None:
            return
        if self.plan_view.risk and not self.accepted:
            self.notify("Accept the loss with A first (or cancel with Esc).",
                        severity="warning")
            return
        self.state = "applying"
        self._status(f"Applying {self.change.action}…", "")
        self._prompt("Applying: wait for the verified result.")
        self.apply_it()

    @work(exclusive=True, group="change")
    async def apply_it(self) -> None:
        def say(text: str) -> None:  # called on the backend thread: post_message is safe
            self.post_message(Step(text))

        outcome = await self.change.apply(self.app.backend, say)  # type: ignore[attr-defined]
        self.outcome = outcome
        self.state = "done" if outcome.ok else "failed"
        if outcome.rows:
            result = self.query_one("#result", DataTable)
            result.display = True
            fill(result, outcome.rows, outcome.columns)
        if outcome.ok:
            self._status(f"{self.change.action}: {outcome.outcome} and verified "
                         "(recorded in the audit log).", "ok")
        else:
            self._status(f"{self.change.action}: {outcome.outcome}. {outcome.error}", "error")
        if outcome.audit_warning:
            self.notify(outcome.audit_warning, severity="warning")
        self._prompt("Esc closes.")

    def on_step(self, message: Step) -> None:
        self.steps.append(message.text)
        self.query_one("#steps", Static).update("\n".join(self.steps))

    def action_close(self) -> None:
        if self.state == "applying":
            self.notify("The change is being applied; wait for its result.",
                        severity="warning")
            return
        self.dismiss(self.outcome)

    def _status(self, text: str, kind: str) -> None:
        status = self.query_one("#change-status", Static)
        status.update(text)
        status.set_classes(kind)

    def _prompt(self, text: str) -> None:
        self.query_one("#change-prompt", Static).update(text)
