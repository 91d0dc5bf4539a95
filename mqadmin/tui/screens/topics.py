"""Topics: every topic (message type, queues, permission, brokers, groups, backlog, TPS); a
topic's routes and queues; create, update and delete through the plan / confirm / apply /
verify dialog."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin.cluster import MQAdmin
from engine.protocol.attributes import format_modification
from mqadmin.operations import topic as topic_ops
from mqadmin.tui.data.changes import MutationChange
from mqadmin.tui.data.topics import TopicDetail, TopicsView, read_topic, read_topics
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.topic_form import TopicForm, TopicRequest
from mqadmin.tui.widgets.cells import count
from mqadmin.tui.widgets.table import Col, RowTable

KIND_STYLES = {"retry": "dim", "dlq": "yellow", "system": "dim"}


def kind(value: object) -> Text | str:
    text = str(value or "")
    return Text(text, style=KIND_STYLES[text]) if text in KIND_STYLES else text


class TopicsScreen(DashScreen):
    TITLE: ClassVar[str] = "Topics"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Routes & queues", show=False),
        Binding("c", "create", "Create"),
        Binding("e", "update", "Update"),
        Binding("d", "delete", "Delete"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.clusters: list[str] = []
        self._previous: tuple[float, dict[str, int]] | None = None

    def body(self) -> ComposeResult:
        yield RowTable([
            Col("topic", "topic"), Col("kind", "kind", kind), Col("type", "type"),
            Col("read", "read q"),
            Col("write", "write q"), Col("perm", "perm"), Col("order", "order"),
            Col("cluster", "cluster"), Col("brokers", "brokers"), Col("groups", "groups"),
            Col("backlog", "backlog", count), Col("tps", "TPS in"),
        ], key=lambda r: str(r["topic"]), sort_by="topic", id="topics")
        yield Static("", id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> TopicsView:
        return await read_topics(admin)

    async def fetch_first(self, admin: MQAdmin) -> TopicsView:
        return await read_topics(admin, with_lag=False)

    def present(self, data: TopicsView) -> None:
        now = time.monotonic()
        produced = {r["topic"]: r["produced"] for r in data.rows if r["produced"] is not None}
        if self._previous is not None:
            then, before = self._previous
            span = max(now - then, 1e-3)
            for row in data.rows:
                if row["topic"] in produced and row["topic"] in before:
                    row["tps"] = round(max(produced[row["topic"]] - before[row["topic"]], 0)
                                       / span, 1)
        self._previous = (now, produced)
        self.clusters = data.clusters
        self.query_one(RowTable).show(data.rows)
        normal = sum(1 for r in data.rows if r["kind"] == "normal")
        text = (f"{len(data.rows)} topics ({normal} normal).  Enter: routes and queues · "
                "c create · e update · d delete · / filter · s sort.  TPS in is measured "
                "between refreshes on topics that have a consumer group.")
        self.show_summary(text, data.failures)

    # ------------------------------------------------------------------ actions

    def action_open(self) -> None:
        row = self.query_one(RowTable).selected
        if row is not None:
            self.app.push_screen(TopicScreen(str(row["topic"])))

    def on_data_table_row_selected(self) -> None:
        self.action_open()

    def action_create(self) -> None:
        if self.dashboard.allow_change("creating a topic"):
            self.app.push_screen(TopicForm(self.clusters), self._plan_update)

    def action_update(self) -> None:
        if not self.dashboard.allow_change("updating a topic"):
            return
        row = self.query_one(RowTable).selected
        if row is None:
            return
        brokers = max(len(str(row["brokers"]).split(",")), 1)
        perm = {"RW-": 6, "R--": 4, "-W-": 2}.get(str(row["perm"]), 6)
        self.app.push_screen(TopicForm(
            self.clusters, topic=str(row["topic"]), read=(row["read"] or 8 * brokers) // brokers,
            write=(row["write"] or 8 * brokers) // brokers, perm=perm, order=bool(row["order"]),
            cluster=str(row["cluster"]).split(",")[0], message_type=row.get("type")),
            self._plan_update)

    def _plan_update(self, request: TopicRequest | None) -> None:
        if request is None:
            return
        config, cluster, changes = request.config, request.cluster, request.attributes
        args = {"topic": config.topic_name, "cluster": cluster, "read_queues":
                config.read_queue_nums, "write_queues": config.write_queue_nums,
                "perm": config.perm, "order": config.order}
        if changes:
            args["attributes"] = format_modification(changes)
        change = MutationChange(
            lambda admin: topic_ops.update_topic(admin, config, broker_addr=None,
                                                 cluster=cluster, attributes=changes), args)
        self.app.push_screen(ChangeScreen(change, f"updateTopic {config.topic_name} on "
                                          f"{cluster}"), lambda _: self.action_refresh_now())

    def action_delete(self) -> None:
        if not self.dashboard.allow_change("deleting a topic"):
            return
        row = self.query_one(RowTable).selected
        if row is None:
            return
        topic = str(row["topic"])
        cluster = str(row["cluster"]).split(",")[0] or (self.clusters or [""])[0]
        change = MutationChange(lambda admin: topic_ops.delete_topic(admin, topic, cluster),
                                {"topic": topic, "cluster": cluster})
        self.app.push_screen(ChangeScreen(change, f"deleteTopic {topic} from {cluster}"),
                             lambda _: self.action_refresh_now())


class TopicScreen(DashScreen):
    """One topic: its message type, its routes, each queue's offsets, the groups consuming
    it."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    def heading(self) -> str:
        return f"Topic {self.topic}  (Esc: back)"

    def body(self) -> ComposeResult:
        yield Static("", id="topic-attributes", classes="panel")
        yield Static("Routes", classes="section")
        yield RowTable([Col(c, c) for c in ("brokerName", "brokerId", "addr", "readQueueNums",
                                            "writeQueueNums", "perm")],
                       key=lambda r: f"{r['brokerName']}/{r['brokerId']}", id="routes")
        yield Static("Queues", classes="section")
        yield RowTable([Col(c, c) for c in ("brokerName", "queueId", "minOffset", "maxOffset",
                                            "lastUpdated")],
                       key=lambda r: f"{r['brokerName']}/{r['queueId']}", sort_by="queueId",
                       id="queues")
        yield Static("Consumer groups", classes="section")
        yield RowTable([Col("group", "group"), Col("lag", "lag", count),
                        Col("queues", "queues"), Col("tps", "consume TPS")],
                       key=lambda r: str(r["group"]), id="topic-groups")

    async def fetch(self, admin: MQAdmin) -> TopicDetail:
        return await read_topic(admin, self.topic)

    def present(self, data: TopicDetail) -> None:
        self.query_one("#topic-attributes", Static).update(data.attributes)
        self.query_one("#routes", RowTable).show(data.routes)
        self.query_one("#queues", RowTable).show(data.queues)
        self.query_one("#topic-groups", RowTable).show(data.groups)
