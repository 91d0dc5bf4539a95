"""The fleet view's data: one row per cluster (context) with the header's health — brokers
up, masters without a slave, groups in ERROR, unhandled dead letters — and the fullest
broker disk, each cluster read over a connection of its own, all clusters at once.

How this works: a `Fleet` holds one `MQAdmin` per endpoint, opened on first use on the
loop that reads (the dashboard's backend thread) and kept between refreshes.  A cluster
that does not answer is a row saying why, never an error of the whole view.  The groups
in ERROR come from the lag collector's window, as in the header: a sampling of a few
seconds cannot tell a stopped group from one that commits every few seconds, so without a
collector the row says so.  The admin database's tables (the dead-letter ledger's, the
lag window's) are made once before the first read: clusters read at once would otherwise
race to create them ("database is locked").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.client.admin.cluster import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.exit_codes import message_for
from mqadmin.operations import cluster as cluster_ops
from mqadmin.operations.dlq.ledger import ledger_of
from mqadmin.tui.backend import TIMEOUT
from mqadmin.tui.data.health import ExtraHealth, Health, read_extra, read_health
from mqadmin.tui.data.lag import collector_report

Row = dict[str, Any]


def label(endpoint: Endpoint) -> str:
    """The cluster's name in the fleet: its context, else its name servers."""
    return endpoint.context or endpoint.text


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """One cluster as the fleet view shows it; `error` set when it could not be read."""

    endpoint: Endpoint
    health: Health | None = None
    extra: ExtraHealth | None = None
    disk: float | None = None  # the fullest commit-log disk, used over total
    error: str = ""

    def row(self) -> Row:
        h, e = self.health, self.extra
        state = "DOWN" if h is None else (
            "DEGRADED" if (h.brokers_up < h.brokers_total or h.no_master
                           or h.namesrv_up < h.namesrv_total) else "UP")
        return {
            "cluster": label(self.endpoint), "namesrv": self.endpoint.text, "state": state,
            "namesrvUp": f"{h.namesrv_up}/{h.namesrv_total}" if h else None,
            "brokersUp": f"{h.brokers_up}/{h.brokers_total}" if h else None,
            "lonelyMasters": len(h.lonely) if h else None,
            "lonely": ", ".join(h.lonely) if h else "",
            "noMaster": ", ".join(h.no_master) if h else "",
            "inError": (len(e.in_error) if e.in_error is not None else None) if e else None,
            "errorGroups": ", ".join(e.in_error) if e and e.in_error else "",
            "deadLetters": e.dead_letters if e else None,
            "disk": round(self.disk * 100, 1) if self.disk is not None else None,
            "error": self.error,
        }


async def read_cluster_health(admin: MQAdmin, endpoint: Endpoint) -> ClusterHealth:
    """One cluster's row: health, the slower half (dead letters, verdicts) and disk."""
    try:
        health = await read_health(admin)
    except Exception as exc:  # the row says why; the other clusters still show
        return ClusterHealth(endpoint, error=message_for(exc))

    async def extra() -> ExtraHealth | str:
        try:
            return await read_extra(admin, endpoint)
        except Exception as exc:
            return message_for(exc)

    found, brokers = await asyncio.gather(extra(), cluster_ops.read_brokers(admin))
    ratios = [r for b in brokers.brokers if (r := b.disk_ratio) is not None]
    return ClusterHealth(endpoint, health, found if isinstance(found, ExtraHealth) else None,
                         max(ratios) if ratios else None,
                         found if isinstance(found, str) else "")


def _prepare_db(endpoint: Endpoint) -> None:
    with ledger_of(endpoint) as ledger:
        ledger.db  # noqa: B018 (opening it creates the tables)
    collector_report(endpoint)  # so do the lag window's reads


class Fleet:
    """The clusters of the fleet view, each with a long-lived admin (used on one loop)."""

    def __init__(self, endpoints: Sequence[Endpoint], *, timeout: float = TIMEOUT) -> None:
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._admins: dict[int, MQAdmin] = {}
        self._db_ready = False

    def _admin(self, i: int) -> MQAdmin:
        admin = self._admins.get(i)
        if admin is None:
            ep = self.endpoints[i]
            admin = self._admins[i] = MQAdmin(ep.addrs, timeout=self.timeout,
                                              credentials=ep.credentials)
        return admin

    async def read(self) -> list[ClusterHealth]:
        """Every cluster's row, read at once, in the order the clusters were given."""
        if not self._db_ready:
            await asyncio.to_thread(_prepare_db, self.endpoints[0])
            self._db_ready = True
        return list(await asyncio.gather(*(
            read_cluster_health(self._admin(i), ep) for i, ep in enumerate(self.endpoints))))

    async def close(self) -> None:
        admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            await admin.close()
