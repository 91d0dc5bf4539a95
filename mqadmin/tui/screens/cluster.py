"""Cluster: brokers by name and role, address, version, TPS with sparklines, disk use,
replication lag of each slave, timer messages waiting and how far the wheel is behind; the
name servers; the controller of each broker set in controller mode (its leader, the
SyncStateSet, epochs, who is behind, an alert below minInSyncReplicas) and `e` to make the
selected broker its set's master (electMaster, through the change dialog)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.tui.data.changes import ElectMasterChange
from mqadmin.tui.data.cluster import ClusterView, read_cluster
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.widgets.cells import role
from mqadmin.tui.widgets.spark import History, spark
from mqadmin.tui.widgets.table import Col, Row, RowTable, plain


class ClusterScreen(DashScreen):
    TITLE: ClassVar[str] = "Cluster"
    REFRESH_EVERY: ClassVar[float] = 3.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "elect_master", "Elect master"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tps_in = History()
        self.tps_out = History()
        self.controllers: list[Row] = []

    def _tps(self, history: History, key: str) -> Any:
        def draw(row: Row) -> str:
            value = row.get(key)
            return f"{plain(value):>8} {spark(history.get(row['key']))}"
        return draw

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("brokerName", "broker"), Col("role", "role", role), Col("brokerId", "id"),
            Col("addr", "address"), Col("version", "version"), Col("epoch", "epoch"),
            Col("inTPS", "TPS in", of_row=self._tps(self.tps_in, "inTPS")),
            Col("outTPS", "TPS out", of_row=self._tps(self.tps_out, "outTPS")),
            Col("disk", "disk used"), Col("hours", "hours kept"),
            Col("replication", "replication"),
            Col("timers", "timers"), Col("timerLag", "timer lag"),
        ], key=lambda r: str(r["key"]), sort_by="brokerName", id="brokers")
        yield Static("", id="namesrvs", classes="panel")
        yield Static("", id="controller", classes="panel")

    async def fetch(self, admin: MQAdmin) -> ClusterView:
        return await read_cluster(admin)

    def present(self, data: ClusterView) -> None:
        for row in data.brokers:
            self.tps_in.add(row["key"], row.get("inTPS"))
            self.tps_out.add(row["key"], row.get("outTPS"))
        keys = [r["key"] for r in data.brokers]
        self.tps_in.keep(keys)
        self.tps_out.keep(keys)
        self.query_one(RowTable).show(data.brokers)
        text = Text("Name servers: ", style="bold")
        for ns in data.namesrvs:
            ok = ns["up"]
            text.append(f"{ns['addr']} ", style="bold")
            text.append("up" if ok else f"DOWN ({ns['error']})",
                        style="green" if ok else "bold red")
            if ok:
                text.append(f", {ns['brokers']} broker(s) registered", style="dim")
            text.append("    ")
        if data.failures:
            text.append("\nBrokers not answering: " + "; ".join(data.failures),
                        style="bold red")
        self.query_one("#namesrvs", Static).update(text)
        self.controllers = data.controllers
        panel = self.query_one("#controller", Static)
        panel.display = bool(data.controllers)
        panel.update(controller_text(data.controllers))

    def action_elect_master(self) -> None:
        """Make the selected broker the master of its set (a set in controller mode)."""
        row = self.query_one(RowTable).selected
        if row is None or not self.dashboard.allow_change("electMaster"):
            return
        found = next((c for c in self.controllers if c["brokerName"] == row["brokerName"]),
                     None)
        ids = [int(i) for i in str(found.get("inSync") or "").split(",") if i] if found else []
        if found is None:
            self.notify(f"{row['brokerName']} does not run in controller mode", severity="error")
            return
        target = self._controller_id(row, found, ids)
        if target is None:
            return
        change = ElectMasterChange(str(found["controller"]), str(row["cluster"]),
                                   str(row["brokerName"]), target,
                                   lambda: int(time.time() * 1000))
        self.app.push_screen(ChangeScreen(change, f"electMaster {row['brokerName']} {target}"),
                             lambda _: self.action_refresh_now())

    def _controller_id(self, row: Row, found: Row, ids: list[int]) -> int | None:
        """The controller's id of the selected broker: the master's is known; a slave's is
        the id the name servers list for it (its controller id)."""
        if row["brokerId"] == 0:
            master: int | None = found.get("masterBrokerId")
            return master
        if int(row["brokerId"]) not in ids:
            self.notify(f"broker {row['brokerId']} of {row['brokerName']} is not in the "
                        "SyncStateSet: the controller would refuse it", severity="warning")
        return int(row["brokerId"])


def controller_text(sets: list[Row]) -> Text:
    """The controller panel: per broker set, the leader, master, epochs, SyncStateSet and
    who is behind; red when the set is below minInSyncReplicas."""
    text = Text()
    for c in sets:
        text.append(f"Controller {c['controller']} ", style="bold")
        text.append(f"leader {c.get('leader')}  ", style="dim")
        text.append(f"{c['brokerName']}: master {c.get('masterBrokerId')} epoch "
                    f"{c.get('masterEpoch')}, SyncStateSet {{{c.get('inSync') or ''}}} "
                    f"(epoch {c.get('syncStateSetEpoch')})")
        if c.get("behind"):
            text.append(f", behind: {c['behind']}", style="yellow")
        if c.get("belowMin"):
            text.append(f"  BELOW minInSyncReplicas {c['minInSyncReplicas']}: SYNC_MASTER "
                        "writes are refused", style="bold red")
        text.append("\n")
    return text
