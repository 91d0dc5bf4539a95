"""Cluster: brokers by name and role, address, version, TPS with sparklines, disk use,
replication lag of each slave, timer messages waiting and how far the wheel is behind; the
name servers."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from mqadmin.tui.data.cluster import ClusterView, read_cluster
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.cells import role
from mqadmin.tui.widgets.spark import History, spark
from mqadmin.tui.widgets.table import Col, Row, RowTable, plain


class ClusterScreen(DashScreen):
    TITLE: ClassVar[str] = "Cluster"
    REFRESH_EVERY: ClassVar[float] = 3.0

    def __init__(self) -> None:
        super().__init__()
        self.tps_in = History()
        self.tps_out = History()

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
