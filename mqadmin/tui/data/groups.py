"""The Consumer groups screen's data: every group's lag, topics, online clients (one
consume-stats request per broker, one client list per group) and the lag monitor's
verdicts, and one group's queues with their lag in time, its clients (consumerProgress and
consumerConnection) and its config (consumeMessageOrderly, retries)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.admin import ConsumerConnection
from engine.protocol.body.heartbeat import GRPC_PROTOCOL, ConsumeType
from mqadmin.config import Endpoint
from mqadmin.operations import consumer as consumer_ops
from mqadmin.operations.consume_stats import read_lags
from mqadmin.operations.group import group_configs, show_group
from mqadmin.operations.lag import status as st
from mqadmin.operations.lag.sample import Known, now_ms
from mqadmin.operations.targets import masters
from mqadmin.operations.times import format_time
from mqadmin.reports.contract import GROUP_SEVERITY, GroupStatus
from mqadmin.tui.data.lag import lag_report

Row = dict[str, Any]
#: Client-list requests in flight at once.
CONCURRENCY = 32
#: The broker's own groups, shown only when they have offsets or clients.
SYSTEM_GROUPS = ("CID_ONS", "CID_RMQ_SYS_", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP",
                 "TOOLS_CONSUMER", "CID_ONSAPI_")


@dataclass(frozen=True, slots=True)
class GroupsView:
    rows: list[Row]
    failures: list[str] = field(default_factory=list)
    source: str = ""  # where the verdicts come from: "collector" or "sampled"


def consumer_kind(cc: ConsumerConnection) -> str:
    """How a group's online clients consume: PUSH, PULL or POP, and over gRPC (5.x clients
    through a proxy) or remoting, e.g. "POP · remoting", "PUSH · gRPC"."""
    protocols = sorted({consumer_ops.protocol_of(c) for c in cc.connection_set})
    kind = cc.consume_type.type_cn if cc.consume_type is not None else "?"
    return f"{kind} · {' + '.join(protocols)}"


@dataclass(frozen=True, slots=True)
class Online:
    """Each group's online clients (how many, how they consume), and the groups that pop."""

    clients: dict[str, tuple[int, str]]
    popping: frozenset[str]


def pops(cc: ConsumerConnection) -> bool:
    """Whether the group's clients consume by POP: they say so, or they are 5.x clients
    over gRPC (whose consumers all pop; Apache's proxy registers them as PULL or PUSH)."""
    return cc.consume_type is ConsumeType.CONSUME_POP or any(
        consumer_ops.protocol_of(c) == GRPC_PROTOCOL for c in cc.connection_set)


async def _online(admin: MQAdmin, addrs: list[str], groups: list[str]) -> Online:
    found = await consumer_ops.online_consumers(admin, addrs, groups, concurrency=CONCURRENCY)
    return Online({g: (len(cc.connection_set), consumer_kind(cc)) if cc is not None
                   else (0, "") for g, cc in found.items()},
                  frozenset(g for g, cc in found.items() if cc is not None and pops(cc)))


async def read_groups(admin: MQAdmin, endpoint: Endpoint, *, full: bool = True,
                      kept: st.KeptSampling | None = None,
                      previous: Sequence[str] = ()) -> GroupsView:
    """Every group with its lag, clients and state, and the lag monitor's verdict, rule,
    lag in time, drain ETA, retention risk and lag history (without a collector: sampled,
    by `kept` when the screen keeps a sampling between refreshes); without `full` only the
    lag (a quicker first view).

    One GET_BROKER_CONSUME_STATS per broker gives the lag, and (as `Known`) the sampling's
    queues; the clients read for the screen tell the sampling which groups are online and
    which pop, so it asks the brokers again only for what that answer lacks.  The clients
    of the `previous` refresh's groups are asked while the brokers gather that answer (on a
    big cluster each takes a good part of a second), those of new groups after it."""
    brokers = await masters(admin, or_slave=True)
    addrs = list(brokers.values())
    early = (asyncio.ensure_future(_online(admin, addrs, sorted(previous)))
             if full and previous else None)
    try:
        found = await read_lags(admin, addrs)
    except BaseException:
        if early is not None:
            early.cancel()
        raise
    lags, failures = found.rows, found.failed
    per: dict[str, Row] = {g: {"group": g, "lag": 0, "tps": 0.0, "last": 0, "queues": 0}
                           for g in found.groups if not g.startswith(SYSTEM_GROUPS)}
    topics: dict[str, set[str]] = defaultdict(set)
    for lag in lags:
        row = per.setdefault(lag.group, {"group": lag.group, "lag": 0, "tps": 0.0,
                                         "last": 0, "queues": 0})
        row["lag"] += lag.diff
        row["queues"] += 1
        row["last"] = max(row["last"], lag.last_timestamp)
        if not lag.topic.startswith("%RETRY%"):
            topics[lag.group].add(lag.topic)
    # A group's TPS comes with each of its queues, the same for a topic's queues: one per
    # (group, topic) pair (the last one read), summed per group.
    pairs = {(lag.group, lag.topic): lag.group_tps for lag in lags}
    tps: dict[str, float] = defaultdict(float)
    for (group, _), value in pairs.items():
        tps[group] += value
    online = Online({}, frozenset())
    if full:
        online = await early if early is not None else online
        new = sorted(set(per) - set(online.clients))
        if new:
            more = await _online(admin, addrs, new)
            online = Online(online.clients | more.clients, online.popping | more.popping)
    report = st.LagReport("", "", 0, 0, ())
    if full:
        reads = [found]

        async def known() -> Known:
            # the first sample takes this refresh's read; a second one (the first refresh
            # samples twice) reads the brokers again
            lags = reads.pop() if reads else await read_lags(admin, addrs)
            return Known(lags.tables(brokers),
                         frozenset(n for n, a in brokers.items() if a in lags.answers),
                         frozenset(g for g, (n, _) in online.clients.items() if n),
                         online.popping)

        report = await lag_report(admin, endpoint, kept=kept, known=known)
    judged = {r["group"]: r for r in st.group_rows(report, now_ms())}
    reports = {g.group: g for g in report.groups}
    rows = []
    for group, row in sorted(per.items()):
        clients, kind = online.clients.get(group, (0, ""))
        verdict = judged.get(group, {})
        rows.append({**row, "tps": round(tps.get(group, 0), 2),
                     "topics": ",".join(sorted(topics[group])), "clients": clients,
                     "kind": kind,
                     "state": ("ONLINE" if clients else "OFFLINE") if full else None,
                     "lastConsumed": format_time(row["last"]) if row["last"] > 0 else None,
                     "verdict": verdict.get("verdict"), "severity": _severity(verdict),
                     "rule": verdict.get("rule"),
                     "lagTime": verdict.get("lagTime"), "eta": verdict.get("eta"),
                     "drainRate": verdict.get("drainRate"),
                     "risk": verdict.get("retentionRisk"),
                     "history": list(reports[group].lags) if group in reports else []})
    return GroupsView(rows, failures, report.source)


def _severity(verdict: Row) -> int:
    """The group's verdict ranked by the lag contract (worst highest; -1 before one)."""
    found = verdict.get("verdict")
    return GROUP_SEVERITY[GroupStatus(found)] if found else -1


@dataclass(frozen=True, slots=True)
class GroupDetail:
    """One group as its screen shows it: consumerProgress's and consumerConnection's rows,
    both made from one read of the group (operations/consumer.py)."""

    queues: list[Row]
    clients: list[Row]
    consume_tps: float
    topics: list[str]
    error: str = ""
    #: The group's config on its masters (updateSubGroup's settings), one line.
    settings: str = ""


async def read_group(admin: MQAdmin, group: str) -> GroupDetail:
    """consumerProgress (lag in messages and time per queue), consumerConnection and the
    group's config (consumeMessageOrderly, retries, ...) as its masters keep it."""
    progress, settings = await asyncio.gather(consumer_ops.read_progress(admin, group),
                                              group_settings(admin, group))
    return GroupDetail(consumer_ops.progress_rows(progress),
                       consumer_ops.connection_rows(progress.clients.connection),
                       progress.consume_tps, progress.topics, settings=settings)


async def group_settings(admin: MQAdmin, group: str) -> str:
    """The group's config as each master keeps it (the same on all: said once), or why not."""
    shown = {show_group(c) for c in (await group_configs(admin, group)).values()
             if c is not None}
    if not shown:
        return "no broker keeps a config of this group (it is created on first use)"
    return " | ".join(sorted(shown))
