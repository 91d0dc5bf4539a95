"""The change dialog: plan (read, nothing changes), confirmation, apply with live steps,
and the verified result — the change runner's flow, as the CLI runs it, on screen.

How this works: the dialog is the change runner's front-end (operations/change.py): as soon
as it opens, a worker runs the change, whose steps call the servers on the backend; the
runner's confirmation shows the plan and waits for `y` (apply) or `n` / Esc (cancel).  A
plan with a `risk` (a failover's estimated loss) needs `A` (accept the loss) before `y` does
anything; a plan with nothing to do (every dead letter chosen already handled) is shown
with the reason and cannot be applied.  While it applies, every step the operation reports
(a switchover's timeline, servers done, copies sent) is appended as it happens; then the
verified rows (and what failed, item by item) and the outcome are shown, and the dialog
returns the `Outcome`.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from mqadmin.config import Endpoint
from mqadmin.exit_codes import message_for
from mqadmin.operations import change
from mqadmin.operations.change import Change, Outcome, Planned, Progress, Unseen, Work
from mqadmin.tui.backend import Backend
from mqadmin.tui.events import Step
from mqadmin.tui.widgets.table import Row, plain

T = TypeVar("T")


def fill(table: DataTable[object], rows: list[Row], columns: tuple[str, ...]) -> None:
    """Put `rows` in a plain table (columns in the given order)."""
    table.clear(columns=True)
    cols = columns or (tuple(rows[0]) if rows else ())
    table.add_columns(*cols)
    for row in rows:
        table.add_row(*(plain(row.get(c)) for c in cols))


@dataclass(frozen=True, slots=True)
class _Steps:
    """A change's progress as lines of the dialog (posted: the backend thread reports)."""

    screen: ChangeScreen
    counted: str  # what the counts count ("servers changed", "sent")

    def count(self, done: int, total: int) -> None:
        self.step(f"{done} of {total} {self.counted}")

    def step(self, text: str) -> None:
        self.screen.post_message(Step(text))


class ChangeScreen(ModalScreen[Outcome | None]):
    """Plan, confirm, apply and verify one change: the change runner's front-end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "apply", "Apply"),
        Binding("A", "accept", "Accept the loss", show=False),
        Binding("n,escape", "close", "Cancel / close"),
    ]

    via = "dashboard"

    def __init__(self, change: Change[Any], title: str) -> None:
        super().__init__()
        self.change = change
        self.title_text = title
        self.plan_view: Planned[Any] | None = None
        self.accepted = False
        self.state = "planning"  # planning, planned or nothing (to do), applying, done, failed
        self.outcome: Outcome | None = None
        self.steps: list[str] = []
        self._answer: asyncio.Future[bool] | None = None

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
        self.run_change()

    def on_unmount(self) -> None:
        self._answer_with(False)

    # ------------------------------------------------------------ the runner's front-end

    @property
    def endpoint(self) -> Endpoint:
        return self._backend.endpoint

    @property
    def _backend(self) -> Backend:
        return self.app.backend  # type: ignore[attr-defined, no-any-return]

    async def call(self, work: Work[T]) -> T:
        return await self._backend.call(work)

    async def confirm(self, planned: Planned[Any]) -> bool:
        """Show the plan, then wait for `y` (True) or `n` / Esc (False)."""
        self._answer = asyncio.get_running_loop().create_future()
        self.plan_view = planned
        self.state = "planned"
        fill(self.query_one("#plan", DataTable), planned.rows, planned.columns)
        if planned.details:
            details = self.query_one("#details", DataTable)
            details.display = True
            fill(details, planned.details, planned.detail_columns)
        if planned.nothing:
            self.state = "nothing"
            self._status(f"Nothing to apply: {planned.nothing}.", "")
            self._prompt("Esc closes.")
            return False
        self._status(f"Plan of {planned.action} {planned.target} (nothing changed yet):", "")
        if planned.risk:
            self.query_one("#risk", Static).update(f"⚠ {planned.risk}")
            self._prompt("Press A to accept this loss, then y to apply; n or Esc cancels.")
        else:
            self._prompt("Apply? y applies, n or Esc cancels.")
        return await self._answer

    def planning(self) -> AbstractContextManager[Progress]:
        return nullcontext(Unseen())

    def applying(self, planned: Planned[Any]) -> AbstractContextManager[Progress]:
        return nullcontext(_Steps(self, planned.counted))

    # ------------------------------------------------------------------ the dialog

    @work(exclusive=True, group="change")
    async def run_change(self) -> None:
        try:
            outcome = await change.run(self.change, self)
        except Exception as exc:
            self.state = "failed"
            self._status(f"Planning failed, nothing was changed: {message_for(exc)}", "error")
            self._prompt("Esc closes.")
            return
        if outcome is None:
            return
        action = self.plan_view.action if self.plan_view is not None else ""
        self.outcome = outcome
        self.state = "done" if outcome.ok else "failed"
        if outcome.rows:
            result = self.query_one("#result", DataTable)
            result.display = True
            fill(result, outcome.rows, outcome.columns)
        if outcome.details:  # what went wrong, item by item (a resend's copies not sent)
            details = self.query_one("#details", DataTable)
            details.display = True
            fill(details, outcome.details, outcome.detail_columns)
        if outcome.ok:
            self._status(f"{action}: {outcome.outcome} and verified "
                         "(recorded in the audit log).", "ok")
        else:
            self._status(f"{action}: {outcome.outcome}. {outcome.message}", "error")
        if outcome.audit_warning:
            self.notify(outcome.audit_warning, severity="warning")
        self._prompt("Esc closes.")

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
        self._status(f"Applying {self.plan_view.action}…", "")
        self._prompt("Applying: wait for the verified result.")
        self._answer_with(True)

    def on_step(self, message: Step) -> None:
        self.steps.append(message.text)
        self.query_one("#steps", Static).update("\n".join(self.steps))

    def action_close(self) -> None:
        if self.state == "applying":
            self.notify("The change is being applied; wait for its result.",
                        severity="warning")
            return
        self._answer_with(False)
        self.dismiss(self.outcome)

    def _answer_with(self, apply: bool) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(apply)

    def _status(self, text: str, kind: str) -> None:
        status = self.query_one("#change-status", Static)
        status.update(text)
        status.set_classes(kind)

    def _prompt(self, text: str) -> None:
        self.query_one("#change-prompt", Static).update(text)
