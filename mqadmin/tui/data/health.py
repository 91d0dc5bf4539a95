"""The header's cluster health: name servers and brokers up, masters without a slave,
groups in ERROR and unhandled dead letters (read here, drawn by widgets/header.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.operations.dlq import list as dlq_list
from mqadmin.operations.dlq.ledger import ledger_of
from mqadmin.operations.ha import replication as ha
from mqadmin.operations.namesrv import cluster_listings
from mqadmin.reports.contract import GroupStatus
from mqadmin.tui.data.lag import collector_report


@dataclass(frozen=True, slots=True)
class Health:
    """The quick half of the header: who answers, and masters alone or missing."""

    namesrv_up: int
    namesrv_total: int
    brokers_up: int
    brokers_total: int
    lonely: tuple[str, ...]  # masters without a slave connected
    no_master: tuple[str, ...]  # broker names without a master up


@dataclass(frozen=True, slots=True)
class ExtraHealth:
    """The slower half: groups whose verdict is ERROR (None when no lag collector runs for
    this cluster) and the unhandled dead letters."""

    in_error: tuple[str, ...] | None
    dead_letters: int


async def read_health(admin: MQAdmin) -> Health:
    """Raises when no name server answers (the header says so)."""
    info, outcomes = await cluster_listings(admin.namesrv)
    answered = [o for o in outcomes if o.ok]
    found = await ha.read_members(admin, info=info)
    members = [m for group in found.values() for m in group]
    up = [m for m in members if m.status is not None]
    lonely = tuple(m.name for m in up if m.status is not None and m.status.master
                   and not m.status.ha_connection_info)
    no_master = tuple(name for name, group in found.items()
                      if not any(m.status is not None and m.status.master for m in group))
    return Health(len(answered), len(outcomes), len(up), len(members), lonely, no_master)


async def read_extra(admin: MQAdmin, endpoint: Endpoint) -> ExtraHealth:
    """Groups in ERROR (from the lag monitor's window, when a collector runs) and
    unhandled dead letters (dlq list with the ledger)."""
    report, dead = await asyncio.gather(asyncio.to_thread(collector_report, endpoint),
                                        _unhandled(admin, endpoint))
    in_error = None if report is None else tuple(sorted(
        g.group for g in report.groups if g.verdict.status is GroupStatus.ERROR))
    return ExtraHealth(in_error, dead)


async def _unhandled(admin: MQAdmin, endpoint: Endpoint) -> int:
    with ledger_of(endpoint) as ledger:
        rows = await dlq_list.list_groups(admin, ledger, sample=0)
    return sum(int(r["unhandled"] or 0) for r in rows)
