"""Fleet: one row per cluster (context) — state, name servers and brokers up, masters
without a slave, groups in ERROR, unhandled dead letters, the fullest disk; Enter opens
that cluster's screens."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.tui.data.fleet import ClusterHealth
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.cells import count, styled
from mqadmin.tui.widgets.table import Col, RowTable

STATE_STYLES = {"UP": "bold green", "DEGRADED": "bold yellow", "DOWN": "bold white on red"}
#: The fullest disk is shown in yellow from this percentage, red from the second.
DISK_WARN, DISK_BAD = 75.0, 90.0


def state(value: Any) -> Text | str:
    return styled(value, STATE_STYLES)


def lonely(row: dict[str, Any]) -> Text | str:
    n = row.get("lonelyMasters")
    if n is None:
        return ""
    text = str(n) + (f" ({row['lonely']})" if n else "")
    return Text(text, style="bold yellow") if n else text


def in_error(row: dict[str, Any]) -> Text | str:
    if row.get("inError") is None:
        return Text("no collector", style="dim") if row.get("brokersUp") else ""
    n = row["inError"]
    shown = row["errorGroups"]
    text = str(n) + (f" ({shown[:40]}{'…' if len(shown) > 40 else ''})" if n else "")
    return Text(text, style="bold red") if n else text


def disk(value: Any) -> Text | str:
    if value is None:
        return ""
    style = "bold red" if value >= DISK_BAD else "bold yellow" if value >= DISK_WARN else ""
    return Text(f"{value:.1f}%", style=style) if style else f"{value:.1f}%"


class FleetScreen(DashScreen):
    TITLE: ClassVar[str] = "Fleet"
    REFRESH_EVERY: ClassVar[float] = 10.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open cluster", show=True),
    ]

    def heading(self) -> str:
        return "Fleet: every cluster  (Enter: open its screens · Esc there: back here)"

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("cluster", "cluster"), Col("state", "state", state),
            Col("namesrvUp", "name servers"), Col("brokersUp", "brokers up"),
            Col("lonelyMasters", "masters without a slave", of_row=lonely),
            Col("inError", "groups in ERROR", of_row=in_error),
            Col("deadLetters", "unhandled DLQ", count), Col("disk", "disk used", disk),
            Col("namesrv", "name server addresses"), Col("error", "error"),
        ], key=lambda r: str(r["cluster"]), sort_by="cluster", id="fleet")
        yield Static("", id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[ClusterHealth]:
        return await self.dashboard.fleet.read()

    def present(self, data: list[ClusterHealth]) -> None:
        rows = [c.row() for c in data]
        self.query_one(RowTable).show(rows)
        down = [r["cluster"] for r in rows if r["state"] == "DOWN"]
        text = (f"{len(rows)} cluster{'' if len(rows) == 1 else 's'}, {len(down)} down"
                + (f" ({', '.join(down)})" if down else "")
                + ".  Enter: open the cluster's screens (the header names it) · / filter "
                  "· s sort.  Groups in ERROR come from `mqadmin lag collect`.")
        self.show_summary(text)

    def action_open(self) -> None:
        row = self.query_one(RowTable).selected
        if row is not None:
            self.dashboard.open_cluster(str(row["cluster"]))

    def on_data_table_row_selected(self) -> None:
        self.action_open()
