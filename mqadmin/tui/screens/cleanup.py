"""Cleanup: every broker's commit-log segments, which have expired and would be deleted,
which groups would lose unconsumed messages with them, and the run (deleteExpiredCommitLog
through the plan / confirm / apply / verify dialog; a loss needs an explicit acceptance)."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.operations import cleanup_loss, store
from mqadmin.operations.mutation import Plan
from mqadmin.tui.data.changes import MutationChange
from mqadmin.tui.data.cleanup import read_segments
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.widgets.cells import count, flag
from mqadmin.tui.widgets.table import Col, RowTable

Row = dict[str, Any]
#: Seconds the run waits for the broker to delete the files before verifying.
RUN_WAIT = 10.0


def _size(value: Any) -> str:
    return store.human(value) if isinstance(value, int) else ""


def _loss(planned: Plan[Any]) -> str:
    """The plan's loss, which the operator must accept explicitly (the CLI's --accept-loss);
    "" when no group loses anything."""
    found = [loss for o in planned.before if o.ok for loss in planned.state(o.addr).losses]
    if not found:
        return ""
    total = sum(loss.messages for loss in found)
    return (f"This deletes {total:,} unconsumed message(s): {cleanup_loss.summary(found)}. "
            "Letting the groups catch up first loses nothing (see Consumer groups).")


class CleanupScreen(DashScreen):
    TITLE: ClassVar[str] = "Cleanup"
    REFRESH_EVERY: ClassVar[float] = 10.0
    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "run", "Delete expired files")]

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("brokerName", "broker"), Col("addr", "address"), Col("file", "segment"),
            Col("fromOffset", "from"), Col("toOffset", "to"), Col("bytes", "size", _size),
            Col("lastWritten", "last written"), Col("expired", "expired", flag),
            Col("deleted", "deleted by a run", lambda v: flag(v, bad_when=True)),
            Col("unconsumed", "unconsumed lost", count), Col("losses", "who loses what"),
        ], key=lambda r: str(r["key"]), sort_by="file", id="segments")
        yield Static("", id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[Row]:
        return await read_segments(admin)

    def present(self, data: list[Row]) -> None:
        self.query_one(RowTable).show(data)
        doomed = [r for r in data if r["deleted"]]
        hours = sorted({r["reservedHours"] for r in data})
        text = (f"{len(data)} segment(s); {len(doomed)} expired and deleted by a run "
                f"({_size(sum(r['bytes'] for r in doomed))}).  fileReservedTime: "
                f"{', '.join(f'{h} h' for h in hours) or '?'}.  x: delete the expired files "
                "of the selected broker now (plan first).")
        self.query_one("#summary", Static).update(text)

    def action_run(self) -> None:
        if not self.dashboard.allow_change("deleting expired files"):
            return
        row = self.query_one(RowTable).selected
        if row is None:
            return
        addr = str(row["addr"])
        change = MutationChange(
            lambda admin: store.delete_expired_commit_log(admin, addr, None, wait=RUN_WAIT,
                                                          refuse_loss=False),
            {"broker_addr": addr, "accept_loss": True}, risk=_loss)
        self.app.push_screen(ChangeScreen(change, f"deleteExpiredCommitLog on {addr}"),
                             lambda _: self.action_refresh_now())
