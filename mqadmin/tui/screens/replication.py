"""Replication: every master/slave link (bytes, messages and seconds behind, epochs); the
switchover wizard and failover with its loss estimate (operations/ha/replication.py, as the CLI)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.tui.data.changes import SwitchChange
from mqadmin.tui.data.replication import Row, read_replication
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.widgets.cells import count, flag, role
from mqadmin.tui.widgets.table import Col, RowTable


class ReplicationScreen(DashScreen):
    TITLE: ClassVar[str] = "Replication"
    REFRESH_EVERY: ClassVar[float] = 2.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "switchover", "Switchover"),
        Binding("f", "failover", "Failover"),
    ]

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("brokerName", "broker"), Col("addr", "address"), Col("brokerId", "id"),
            Col("role", "role", role), Col("epoch", "epoch"), Col("maxOffset", "max offset"),
            Col("writable", "writable", lambda v: flag(v, bad_when=False) if v is not None
                else ""),
            Col("peer", "peer"), Col("peerOffset", "peer offset"),
            Col("behindBytes", "behind (bytes)", count),
            Col("behindMessages", "behind (msgs)", count),
            Col("behindSeconds", "behind (s)"),
        ], key=lambda r: str(r["key"]), sort_by="brokerName", id="links")
        yield Static("w: switchover of the selected broker name (no loss: writes pause until "
                     "the slave has every byte) · f: failover when its master is dead (shows "
                     "the estimated loss and needs your acceptance).", classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[Row]:
        return await read_replication(admin)

    def present(self, data: list[Row]) -> None:
        self.query_one(RowTable).show(data)

    def _broker_name(self) -> str | None:
        row = self.query_one(RowTable).selected
        return str(row["brokerName"]) if row is not None else None

    def action_switchover(self) -> None:
        if not self.dashboard.allow_change("a switchover"):
            return
        name = self._broker_name()
        if name is not None:
            self.app.push_screen(ChangeScreen(SwitchChange(name), f"switchover {name}"),
                                 lambda _: self.action_refresh_now())

    def action_failover(self) -> None:
        if not self.dashboard.allow_change("a failover"):
            return
        name = self._broker_name()
        if name is not None:
            self.app.push_screen(ChangeScreen(SwitchChange(name, failover=True),
                                              f"failover {name}"),
                                 lambda _: self.action_refresh_now())
