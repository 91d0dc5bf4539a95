"""Consumer groups: every group's lag (with a sparkline of the last refreshes), clients and
state; a group's queues with lag in time and its online clients; reset offsets with a plan."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.broker import RESET_TO_MAX
from engine.client.admin.cluster import MQAdmin
from mqadmin.operations import group as group_ops
from mqadmin.operations.consumer import TOTAL
from mqadmin.operations.lag.status import KeptSampling
from mqadmin.reports.contract import GROUP_SEVERITY, GroupStatus
from mqadmin.tui.data.changes import MutationChange
from mqadmin.tui.data.groups import GroupDetail, GroupsView, read_group, read_groups
from mqadmin.tui.data.lag import kept_sampling
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.reset_form import ResetForm, ResetRequest
from mqadmin.tui.widgets.cells import count, verdict
from mqadmin.tui.widgets.spark import History, spark
from mqadmin.tui.widgets.table import Col, Row, RowTable


def _clients(row: Row) -> Text | str:
    if row.get("state") is None:
        return ""  # not read yet
    n = row.get("clients") or 0
    return f"{n} online" if n else Text("none online", style="bold red" if row.get("lag")
                                        else "dim")


def _risk(value: object) -> Text | str:
    return Text(str(value), style="bold red") if value else ""


def _lag_ms(value: object) -> str:
    if not isinstance(value, int):
        return ""
    seconds = value / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class GroupsScreen(DashScreen):
    TITLE: ClassVar[str] = "Consumer groups"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Queues & clients", show=False),
        Binding("r", "reset", "Reset offsets"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.lag_history = History()
        #: Without a collector, the verdicts' sampling, kept between refreshes.
        self._sampling: KeptSampling | None = None

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("group", "group"), Col("verdict", "verdict", verdict, sort_on="severity"),
            Col("state", "clients", of_row=_clients), Col("kind", "consumers"),
            Col("lag", "lag (msgs)", count),
            Col("lagTime", "lag (time)"), Col("trend", "lag trend", of_row=self._trend),
            Col("eta", "drain ETA"), Col("tps", "consume TPS"), Col("topics", "topics"),
            Col("risk", "retention risk", _risk), Col("rule", "rule"),
        ], key=lambda r: str(r["group"]), sort_by="verdict", reverse=True,
           id="groups")
        yield Static("", id="summary", classes="panel")

    def _trend(self, row: Row) -> str:
        history = row.get("history") or self.lag_history.get(row["group"])
        return spark(history, 16)

    async def fetch(self, admin: MQAdmin) -> GroupsView:
        endpoint = self.dashboard.backend.endpoint
        if self._sampling is None or self._sampling.cluster != endpoint.cluster_key:
            self._sampling = kept_sampling(endpoint)
        shown: GroupsView | None = self.data
        previous = [str(r["group"]) for r in shown.rows] if shown is not None else []
        return await read_groups(admin, endpoint, kept=self._sampling, previous=previous)

    async def fetch_first(self, admin: MQAdmin) -> GroupsView:
        return await read_groups(admin, self.dashboard.backend.endpoint, full=False)

    def present(self, data: GroupsView) -> None:
        for row in data.rows:
            self.lag_history.add(row["group"], row["lag"])
        self.lag_history.keep(r["group"] for r in data.rows)
        self.query_one(RowTable).show(data.rows)
        counts = Counter(str(r["verdict"]) for r in data.rows if r.get("verdict"))
        worst_first = sorted(GroupStatus, key=GROUP_SEVERITY.__getitem__, reverse=True)
        verdicts = ", ".join(f"{counts[s]} {s}" for s in worst_first
                             if s is not GroupStatus.OK and counts[s]) or (
            "all OK" if counts else "not judged yet")
        source = {"collector": "the lag monitor's window",
                  "sampled": "a quick sampling (no `mqadmin lag collect` runs for this "
                             "cluster)"}.get(data.source, "the lag monitor (reading…)")
        text = (f"{len(data.rows)} groups: {verdicts}; verdicts from {source}.  Enter: "
                "queues, lag in time and clients · r reset offsets · / filter · s sort")
        self.show_summary(text, data.failures)

    def action_open(self) -> None:
        row = self.query_one(RowTable).selected
        if row is not None:
            self.app.push_screen(GroupScreen(str(row["group"])))

    def on_data_table_row_selected(self) -> None:
        self.action_open()

    def action_reset(self) -> None:
        if not self.dashboard.allow_change("resetting offsets"):
            return
        row = self.query_one(RowTable).selected
        if row is not None:
            reset_offsets(self, str(row["group"]),
                          [t for t in str(row["topics"]).split(",") if t])


def reset_offsets(screen: DashScreen, group: str, topics: list[str]) -> None:
    """Ask for the topic and time, then plan / confirm / apply resetOffsetByTime."""
    if not topics:
        screen.notify(f"{group} consumes no topic yet: nothing to reset.", severity="warning")
        return

    def planned(request: ResetRequest | None) -> None:
        if request is None:
            return
        topic, ms = request.topic, request.timestamp
        change = MutationChange(
            lambda admin: group_ops.reset_offset(admin, group, topic, ms, force=True),
            {"group": group, "topic": topic,
             "timestamp": "now" if ms == RESET_TO_MAX else ms})
        screen.app.push_screen(ChangeScreen(change, f"resetOffsetByTime {topic}@{group}"),
                               lambda _: screen.action_refresh_now())

    screen.app.push_screen(ResetForm(group, topics), planned)


class GroupScreen(DashScreen):
    """One group: its settings (consumeMessageOrderly, retries), each queue's lag in
    messages and time, and its online clients."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("r", "reset", "Reset offsets")]

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group
        self.topics: list[str] = []

    def heading(self) -> str:
        return f"Consumer group {self.group}  (Esc: back)"

    def body(self) -> ComposeResult:
        yield Static("Settings", classes="section")
        yield Static("", id="group-settings", classes="panel")
        yield Static("Queues", classes="section")
        yield RowTable([
            Col("topic", "topic"), Col("brokerName", "broker"), Col("queueId", "queue"),
            Col("brokerOffset", "broker offset"), Col("consumerOffset", "committed"),
            Col("diff", "lag (msgs)", count), Col("inflight", "in flight", count),
            Col("lagMs", "lag (time)", _lag_ms),
            Col("clientIP", "client"), Col("oldestUnconsumed", "oldest unconsumed"),
        ], key=lambda r: f"{r['topic']}/{r['brokerName']}/{r['queueId']}",
            pinned=lambda r: r["topic"] == TOTAL, id="queues")
        yield Static("Online clients", classes="section")
        yield RowTable([Col(c, c) for c in ("clientId", "clientAddr", "language", "version",
                                            "protocol", "consumeType", "messageModel",
                                            "subscriptions")],
                       key=lambda r: str(r["clientId"]), id="clients")

    async def fetch(self, admin: MQAdmin) -> GroupDetail:
        return await read_group(admin, self.group)

    def present(self, data: GroupDetail) -> None:
        self.topics = data.topics
        rows: list[Row] = [dict(r, topic=r["topic"] if r["topic"] else "") for r in data.queues]
        self.query_one("#queues", RowTable).show(rows)
        self.query_one("#clients", RowTable).show(data.clients)
        self.query_one("#group-settings", Static).update(data.settings)

    def action_reset(self) -> None:
        if self.dashboard.allow_change("resetting offsets"):
            reset_offsets(self, self.group, self.topics)
