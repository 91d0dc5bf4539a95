"""The header's cluster health: name servers and brokers up, masters without a slave,
groups in ERROR/STOP and unhandled dead letters."""

from __future__ import annotations

import asyncio

from rich.text import Text

from engine.client.admin import MQAdmin
from engine.protocol.body.route import ClusterInfo
from mqadmin.config import Endpoint
from mqadmin.operations import dlq_list, ha
from mqadmin.operations.dlq_ledger import ledger_of
from mqadmin.tui.data.lag import collector_report


def _part(text: Text, label: str, value: str, bad: bool, *, first: bool = False) -> None:
    if not first:
        text.append("  ·  ", style="dim")
    text.append(f"{label} ")
    text.append(value, style="bold red" if bad else "bold green")


async def read_health(admin: MQAdmin) -> Text:
    """One line of health; raises when no name server answers (the header says so)."""
    outcomes = await admin.namesrv.on_each(lambda ns: admin.namesrv.cluster_info(addr=ns))
    answered = [o for o in outcomes if o.ok]
    if not answered:
        error = outcomes[0].error
        assert error is not None
        raise error
    info: ClusterInfo = answered[0].value  # type: ignore[assignment]
    names = sorted(info.broker_addr_table)
    found = await asyncio.gather(*(ha.members(admin, name) for name in names))
    members = [m for group in found for m in group]
    up = [m for m in members if m.status is not None]
    lonely = [m.name for m in up if m.status is not None and m.status.master
              and not m.status.ha_connection_info]
    no_master = [name for name, group in zip(names, found, strict=True)
                 if not any(m.status is not None and m.status.master for m in group)]
    text = Text()
    _part(text, "name servers", f"{len(answered)}/{len(outcomes)} up",
          len(answered) < len(outcomes), first=True)
    _part(text, "brokers", f"{len(up)}/{len(members)} up", len(up) < len(members))
    _part(text, "masters without a slave", str(len(lonely)) + (
        f" ({', '.join(lonely)})" if lonely else ""), bool(lonely))
    if no_master:
        _part(text, "no master", ", ".join(no_master), True)
    return text


async def read_extra(admin: MQAdmin, endpoint: Endpoint) -> Text:
    """The slower part of the header: groups in ERROR/STOP (from the lag monitor's window,
    when a collector runs) and unhandled dead letters (dlq list with the ledger)."""
    report, dead = await asyncio.gather(asyncio.to_thread(collector_report, endpoint),
                                        _unhandled(admin, endpoint))
    text = Text()
    if report is None:
        text.append("  ·  ", style="dim")
        text.append("lag verdicts: no `mqadmin lag collect` for this cluster", style="dim")
    else:
        bad = sorted(g.group for g in report.groups
                     if g.verdict.status.value in ("ERROR", "STOP"))
        _part(text, "groups in ERROR/STOP", str(len(bad)) + (
            f" ({', '.join(bad[:3])}{'…' if len(bad) > 3 else ''})" if bad else ""), bool(bad))
    _part(text, "unhandled dead letters", f"{dead:,}", dead > 0)
    return text


async def _unhandled(admin: MQAdmin, endpoint: Endpoint) -> int:
    with ledger_of(endpoint) as ledger:
        rows = await dlq_list.list_groups(admin, ledger, sample=0)
    return sum(int(r["unhandled"] or 0) for r in rows)
