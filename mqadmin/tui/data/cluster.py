"""The Cluster screen's data: every broker with its role, traffic, disk, replication lag and
timer messages (the snapshots behind clusterList, haStatus and brokerStatus), and the name
servers, from one cluster listing per refresh."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin import MQAdmin
from engine.protocol.body.route import ClusterInfo
from mqadmin.operations import cluster as cluster_ops
from mqadmin.operations.ha import replication as ha
from mqadmin.operations.namesrv import cluster_listings

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterView:
    brokers: list[Row]
    namesrvs: list[Row]
    failures: list[str] = field(default_factory=list)


async def _listing(admin: MQAdmin) -> tuple[ClusterInfo, list[Row]]:
    """The cluster as the first name server that answers lists it, and each name server's
    row (up, brokers it knows).

    Raises:
        ClientError: no name server answers (the first one's error).
    """
    info, outcomes = await cluster_listings(admin.namesrv)
    rows = [{"addr": o.addr, "up": o.ok,
             "brokers": sum(len(d.broker_addrs) for d in o.value.broker_addr_table.values())
             if o.value is not None else None,
             "error": str(o.error).splitlines()[0] if o.error else ""} for o in outcomes]
    return info, rows


def _replication(found: dict[str, list[ha.Member]]) -> dict[str, Row]:
    """Per broker address: role, epoch, and for a slave how far behind its master it is."""
    out: dict[str, Row] = {}
    for m in (m for group in found.values() for m in group):
        s = m.status
        if s is None:
            out[m.addr] = {"role": f"unreachable: {m.error}", "epoch": None, "slaves": 0,
                           "behindBytes": None, "behindMessages": None}
        elif "SLAVE" not in s.broker_role:
            out[m.addr] = {"role": s.broker_role, "epoch": None if m.note else s.epoch,
                           "slaves": sum(1 for c in s.ha_connection_info if c.addr),
                           "behindBytes": None,
                           "behindMessages": None}
        else:
            link = s.ha_client_runtime_info
            out[m.addr] = {"role": s.broker_role, "epoch": None if m.note else s.epoch,
                           "slaves": 0,
                           "behindBytes": link.estimated_loss_bytes,
                           "behindMessages": link.estimated_loss_messages}
    return out


async def read_cluster(admin: MQAdmin) -> ClusterView:
    info, namesrvs = await _listing(admin)
    runtime, found = await asyncio.gather(cluster_ops.read_brokers(admin, info=info),
                                          ha.read_members(admin, info=info))
    repl = _replication(found)
    rows: list[Row] = []
    for b in runtime.brokers:
        r = repl.get(b.addr, {})
        role = r.get("role") or ("MASTER" if b.broker_id == 0 else "SLAVE")
        if role.startswith("unreachable"):
            role = "DOWN"
        slave = "SLAVE" in role
        lag = (f"{r.get('behindBytes') or 0:,} B (≈{r.get('behindMessages') or 0:,} msgs)"
               if slave else f"{r.get('slaves', 0)} slave(s)" if role != "DOWN" else "")
        space = b.disk_ratio
        rows.append({"key": b.addr, "cluster": b.cluster, "brokerName": b.broker_name,
                     "brokerId": b.broker_id, "role": role, "addr": b.addr,
                     "version": b.version, "epoch": r.get("epoch"), "inTPS": b.in_tps,
                     "outTPS": b.out_tps,
                     "disk": f"{space * 100:.1f}%" if space is not None else None,
                     "hours": b.hours_kept, "replication": lag,
                     "timers": b.timers_waiting,
                     "timerLag": f"{b.timer_behind_s} s" if b.timer_behind_s is not None
                     else None,
                     "behindBytes": r.get("behindBytes") if slave else None})
    failures = [f"{addr}: {str(err).splitlines()[0]}" for addr, err in runtime.failures]
    return ClusterView(rows, namesrvs, failures)
