"""Fixed data for the layout snapshots: each screen shows these rows instead of reading a
cluster (ports and times of a live cluster change on every run), through its own `present`
and widgets, so a layout change shows up in review as a changed SVG."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.pilot import Pilot

from engine.protocol.message import MessageRecord, properties_to_string
from mqadmin.config import Endpoint
from mqadmin.operations.messages.ids import StoredMessage
from mqadmin.operations.messages.query import MessageDetail, Track
from mqadmin.tui.app import Dashboard
from mqadmin.tui.data.access import AccessView
from mqadmin.tui.data.cluster import ClusterView
from mqadmin.tui.data.dlq import DlqView
from mqadmin.tui.data.groups import GroupsView
from mqadmin.tui.data.message_detail import MessageView
from mqadmin.tui.data.timeline import timeline
from mqadmin.tui.data.topics import TopicsView
from mqadmin.tui.screens.access import AccessScreen
from mqadmin.tui.screens.audit import AuditScreen
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.cleanup import CleanupScreen
from mqadmin.tui.screens.cluster import ClusterScreen
from mqadmin.tui.screens.dlq import DlqScreen
from mqadmin.tui.screens.groups import GroupsScreen
from mqadmin.tui.screens.message_detail import MessageDetailScreen
from mqadmin.tui.screens.message_search import MessageSearchScreen
from mqadmin.tui.screens.producers import ProducersScreen
from mqadmin.tui.screens.replication import ReplicationScreen
from mqadmin.tui.screens.topics import TopicsScreen
from tests.mqadmin.tui.pilot import until

M, S = "10.0.0.1:10911", "10.0.0.2:10911"
T0 = "2026-01-02 03:04:05.678"

BODY = b'{"order": 9, "amount": 12.5, "items": ["tea", "cups"]}'
#: A stored message (its times read in UTC: the snapshot test sets TZ).
MESSAGE = StoredMessage(MessageRecord(
    total_size=0, magic=0, body_crc=0, queue_id=3, flag=0, queue_offset=1523,
    physical_offset=1048576, sysflag=0, born_timestamp=1767323045000,
    born_host=("10.0.0.7", 50412), store_timestamp=1767323045678, store_host=("10.0.0.1", 10911),
    reconsume_times=0, prepared_transaction_offset=0, body=BODY, topic="Orders",
    properties_raw=properties_to_string({
        "KEYS": "order-9", "TAGS": "paid", "UNIQ_KEY": "0A0000070F2C18B4AAC2132A0A3F0001",
        "CLUSTER": "C"}).encode()), M, "broker-a")

FIXED: dict[type[DashScreen], Any] = {
    MessageSearchScreen: ["Orders"],
    ProducersScreen: ["Orders"],
    MessageDetailScreen: MessageView(
        MessageDetail(MESSAGE, (Track("billing", "NOT_CONSUME_YET"),
                                Track("shipping", "CONSUMED"))),
        timeline(MESSAGE.record, [
            {"type": "Pub", "timestamp": 1767323045661, "group": "PG-orders",
             "clientHost": "10.0.0.7", "status": "success", "costMs": 17, "retryTimes": None},
            {"type": "SubBefore", "timestamp": 1767323045702, "group": "shipping",
             "clientHost": "10.0.0.8", "status": None, "costMs": None, "retryTimes": 0},
            {"type": "SubAfter", "timestamp": 1767323045702, "group": "shipping",
             "clientHost": "10.0.0.8", "status": "success", "costMs": 3, "retryTimes": None}])),
    ClusterScreen: ClusterView(
        [{"key": M, "cluster": "C", "brokerName": "broker-a", "brokerId": 0,
          "role": "SYNC_MASTER", "addr": M, "version": "V4_9_7", "epoch": 2, "inTPS": 120.5,
          "outTPS": 118.25, "disk": "41.2%", "hours": 71.5, "replication": "1 slave(s)",
          "timers": 12_345, "timerLag": "0 s"},
         {"key": S, "cluster": "C", "brokerName": "broker-a", "brokerId": 1, "role": "SLAVE",
          "addr": S, "version": "V4_9_7", "epoch": 2, "inTPS": 0.0, "outTPS": 0.0,
          "disk": "41.0%", "hours": 71.5, "replication": "1,024 B (≈12 msgs)",
          "timers": 12_345, "timerLag": "3 s"}],
        [{"addr": "10.0.0.9:9876", "up": True, "brokers": 2, "error": ""}]),
    TopicsScreen: TopicsView(
        [{"topic": "Orders", "kind": "normal", "type": "FIFO", "read": 8, "write": 8,
          "perm": "RW-",
          "order": False, "cluster": "C", "brokers": "broker-a", "groups": 2,
          "backlog": 1523, "produced": 99},
         {"topic": "%DLQ%billing", "kind": "dlq", "type": None, "read": 1, "write": 1,
          "perm": "RW-",
          "order": False, "cluster": "C", "brokers": "broker-a", "groups": 0,
          "backlog": None, "produced": None}], ["C"], {"broker-a": M}),
    GroupsScreen: GroupsView(
        [{"group": "billing", "verdict": "ERROR", "severity": 3, "clients": 0, "lag": 1523,
          "lagTime": "2 h 5 min", "eta": "never at the current rate", "tps": 0.0,
          "topics": "Orders", "risk": "loses ≈ 1,240 messages in 5 h 12 min unless it "
                                      "consumes 2.3× faster",
          "rule": "STOP: no commit for 2 h", "history": [100, 400, 900, 1523], "state": "OFFLINE",
          "kind": ""},
         {"group": "notify", "verdict": "OK", "severity": 0, "clients": 3, "lag": 40,
          "lagTime": "0.2 s", "eta": "caught up", "tps": 210.0, "topics": "Orders", "risk": None,
          "rule": "",
          "history": [30, 52, 41, 40], "state": "ONLINE", "kind": "PUSH · gRPC"},
         {"group": "shipping", "verdict": "OK", "severity": 0, "clients": 2, "lag": 3,
          "lagTime": "0.4 s", "eta": "caught up", "tps": 50.0, "topics": "Orders", "risk": None,
          "rule": "",
          "history": [5, 2, 4, 3], "state": "ONLINE", "kind": "POP · remoting"}],
        source="collector"),
    DlqScreen: DlqView(
        [{"group": "billing", "deadLetters": 412, "unhandled": 400, "lastHour": 12,
          "lastDay": 412, "oldest": T0, "newest": T0, "topTopics": "Orders (412)",
          "errors": None}],
        [{"batch": "20260102-030405-ab12", "group": "billing", "action": "resend",
          "target": "retry", "at": "2026-01-02T03:04:05+00:00", "total": 12, "sent": 12,
          "failed": 0, "unsent": 0, "consumed": 10, "pending": 2, "backInDlq": 0,
          "reason": None}]),
    ReplicationScreen: [
        {"key": f"{M}>{S}", "brokerName": "broker-a", "addr": M, "brokerId": 0,
         "role": "SYNC_MASTER", "epoch": 2, "maxOffset": 1048576, "writable": True, "peer": S,
         "peerOffset": 1047552, "behindBytes": 1024, "behindMessages": 12,
         "behindSeconds": 0.2},
        {"key": f"{S}>{M}", "brokerName": "broker-a", "addr": S, "brokerId": 1,
         "role": "SLAVE", "epoch": 2, "maxOffset": 1047552, "writable": False, "peer": M,
         "peerOffset": 1048576, "behindBytes": 1024, "behindMessages": 12}],
    CleanupScreen: [
        {"key": f"{M}/0", "brokerName": "broker-a", "addr": M, "file": "0" * 20,
         "fromOffset": 0, "toOffset": 1073741824, "bytes": 1073741824, "lastWritten": T0,
         "expired": True, "deleted": True, "reservedHours": 72, "unconsumed": 59,
         "losses": "billing 59 (Orders 59)"},
        {"key": f"{M}/1", "brokerName": "broker-a", "addr": M, "file": "00000000001073741824",
         "fromOffset": 1073741824, "toOffset": 1100000000, "bytes": 26258176,
         "lastWritten": "(being written)", "expired": False, "deleted": False,
         "reservedHours": 72, "unconsumed": None, "losses": None}],
    AuditScreen: [
        {"id": 1, "at": "2026-01-02T03:04:05.678+00:00", "who": "ops@host", "context": "prod",
         "command": "updateTopic", "target": "Orders", "outcome": "applied", "exitCode": 0,
         "via": "dashboard"},
        {"id": 2, "at": "2026-01-02T03:05:00.000+00:00", "who": "ops@host", "context": "prod",
         "command": "switchover", "target": "broker-a", "outcome": "failed", "exitCode": 1,
         "via": "cli"}],
    AccessScreen: AccessView(
        [{"broker": M, "username": "admin", "userType": "Super", "userStatus": "enable"},
         {"broker": M, "username": "app", "userType": "Normal", "userStatus": "disable"}],
        [{"key": "0", "broker": M, "subject": "User:app", "policyType": "Custom",
          "resource": "Topic:Orders", "actions": "Pub,Sub", "sourceIps": "",
          "decision": "Allow"}]),
}


def fixed(cls: type[DashScreen]) -> type[DashScreen]:
    async def fetch(self: DashScreen, admin: Any) -> Any:
        return FIXED[cls]

    return type(cls.__name__, (cls,), {"fetch": fetch, "fetch_first": fetch,
                                       "REFRESH_EVERY": 3600.0})


class SnapshotDashboard(Dashboard):
    """The dashboard on fixed data, a fixed header and a fixed clock."""

    MODES = {name: fixed(cls) for name, cls in Dashboard.MODES.items()}  # noqa: RUF012

    def __init__(self, start: str) -> None:
        super().__init__(Endpoint(["10.0.0.9:9876"], "prod"), start=start)

    def health_loop(self) -> None:  # type: ignore[override]
        self.health = Text("name servers 1/1 up  ·  brokers 2/2 up  ·  masters without a "
                           "slave 0  ·  groups in ERROR 1 (billing)  ·  unhandled "
                           "dead letters 400")

    def refreshed(self) -> None:
        self.refreshed_at = "03:04:05"
        self._start_health()


async def shown(pilot: Pilot[None]) -> None:
    def done() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, DashScreen) and screen.loads >= 1 + int(screen.partial_first)

    await until(pilot, done, what="the data")
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await pilot.pause()
