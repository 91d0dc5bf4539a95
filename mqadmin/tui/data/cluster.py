"""The Cluster screen's data: every broker with its role, traffic, disk and replication
lag (clusterList and haStatus, as the CLI reads them), and the name servers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.operations import cluster as cluster_ops
from mqadmin.operations import ha

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterView:
    brokers: list[Row]
    namesrvs: list[Row]
    failures: list[str] = field(default_factory=list)


async def _namesrvs(admin: MQAdmin) -> list[Row]:
    outcomes = await admin.namesrv.on_each(lambda ns: admin.namesrv.cluster_info(addr=ns))
    return [{"addr": o.addr, "up": o.ok,
             "brokers": sum(len(d.broker_addrs) for d in o.value.broker_addr_table.values())
             if o.value is not None else None,
             "error": str(o.error).splitlines()[0] if o.error else ""} for o in outcomes]


def _replication(ha_rows: list[Row]) -> dict[str, Row]:
    """Per broker address: role, epoch, and for a slave how far behind its master it is."""
    out: dict[str, Row] = {}
    for row in ha_rows:
        addr = row["addr"]
        role = str(row.get("role") or "")
        entry = out.setdefault(addr, {"role": role, "epoch": row.get("epoch"), "slaves": 0,
                                      "behindBytes": None, "behindMessages": None})
        if role.startswith("unreachable"):
            continue
        if row.get("writable") is not None and "SLAVE" not in role:
            entry["slaves"] += 1 if row.get("peer") else 0
        else:
            entry["behindBytes"] = row.get("behindBytes")
            entry["behindMessages"] = row.get("behindMessages")
    return out


async def read_cluster(admin: MQAdmin) -> ClusterView:
    listed, ha_rows, namesrvs = await asyncio.gather(
        cluster_ops.cluster_list(admin), ha.status_of(admin, None), _namesrvs(admin))
    repl = _replication(ha_rows)
    rows: list[Row] = []
    for row in listed.rows:
        r = repl.get(row["addr"], {})
        role = r.get("role") or ("MASTER" if row["brokerId"] == 0 else "SLAVE")
        if role.startswith("unreachable"):
            role = "DOWN"
        slave = "SLAVE" in role
        lag = (f"{r.get('behindBytes') or 0:,} B (≈{r.get('behindMessages') or 0:,} msgs)"
               if slave else f"{r.get('slaves', 0)} slave(s)" if role != "DOWN" else "")
        rows.append({"key": row["addr"], "cluster": row["cluster"],
                     "brokerName": row["brokerName"], "brokerId": row["brokerId"],
                     "role": role, "addr": row["addr"], "version": row.get("version"),
                     "epoch": r.get("epoch"), "inTPS": row.get("inTPS"),
                     "outTPS": row.get("outTPS"),
                     "disk": (f"{row['space'] * 100:.1f}%" if row.get("space") is not None
                              else None),
                     "hours": row.get("hour"), "replication": lag,
                     "behindBytes": r.get("behindBytes") if slave else None})
    failures = [f"{addr}: {str(err).splitlines()[0]}" for addr, err in listed.failures]
    return ClusterView(rows, namesrvs, failures)
