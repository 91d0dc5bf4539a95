"""`dlq status`: for each batch, what the ledger says and what the group has done since.

How this works: a resent copy counts as consumed once the group's committed offset on the
copy's queue (``%RETRY%<group>`` or the original topic) has passed the copy's queue offset
(QUERY_CONSUMER_OFFSET, once per queue); sent copies not consumed yet are pending.  Copies
that failed again and came back are the dead letters stored since the batch that carry its
batch property.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError, QueryNotFoundError
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.dlq.ledger import DISCARDED, FAILED, PENDING, SENDING, SENT, Batch, Ledger
from mqadmin.operations.dlq.model import BATCH_PROPERTY, Filters, Row
from mqadmin.operations.dlq.read import read_all
from mqadmin.operations.targets import masters
from mqadmin.operations.times import format_time

STATUS_COLUMNS = ("batch", "group", "action", "target", "at", "who", "total", "sent",
                  "failed", "unsent", "consumed", "pending", "backInDlq")


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


async def _consumed(admin: MQAdmin, group: str, rows: Sequence[Row],
                    addrs: dict[str, str]) -> int:
    queues = {(r["target_topic"], r["new_broker"], r["new_queue_id"]) for r in rows
              if r["state"] == SENT and r["new_broker"] is not None}

    async def committed(topic: str, broker: str, qid: int) -> int:
        addr = addrs.get(broker)
        if addr is None:
            return -1
        try:
            return await admin.broker.consumer_offset(addr, group, topic, qid)
        except (QueryNotFoundError, ClientError):
            return -1

    keys = sorted(queues)
    offsets = dict(zip(keys, await asyncio.gather(*(committed(*k) for k in keys)), strict=True))
    return sum(1 for r in rows if r["state"] == SENT and r["new_broker"] is not None
               and offsets.get((r["target_topic"], r["new_broker"], r["new_queue_id"]), -1)
               > r["new_queue_offset"])


async def _back(admin: MQAdmin, b: Batch) -> int:
    try:
        letters = await read_all(admin, b.group, Filters(since=_ms(b.at)))
    except TargetNotFound:
        return 0
    return sum(1 for d in letters if d.properties.get(BATCH_PROPERTY) == b.batch)


async def status(admin: MQAdmin, ledger: Ledger, batch: str | None = None, *,
                 group: str | None = None, limit: int = 20) -> list[Row]:
    """One row per batch (the one named, else the newest `limit`, of `group` when given).

    Raises:
        TargetNotFound: the batch named is not in this cluster's ledger.
    """
    if batch is not None:
        found = ledger.batch(batch)
        if found is None:
            raise TargetNotFound(f"no batch {batch!r} in the ledger of this cluster; list "
                                 "them with `mqadmin dlq status`.")
        batches = [found]
    else:
        batches = ledger.batches(group, limit)
    addrs = await masters(admin, or_slave=True)
    out: list[Row] = []
    for b in batches:
        rows = ledger.rows(b.batch)
        counts = ledger.counts(b.batch)
        row: Row = {"batch": b.batch, "group": b.group, "action": b.action, "target": b.target,
                    "at": format_time(_ms(b.at)), "who": b.who, "total": b.total,
                    "sent": counts.get(SENT, 0), "failed": counts.get(FAILED, 0),
                    "unsent": counts.get(PENDING, 0) + counts.get(SENDING, 0),
                    "consumed": None, "pending": None, "backInDlq": None,
                    "filters": b.filters, "reason": b.reason or None}
        if b.action == "resend":
            consumed = await _consumed(admin, b.group, rows, addrs)
            row |= {"consumed": consumed, "pending": row["sent"] - consumed,
                    "backInDlq": await _back(admin, b)}
        else:
            row["sent"] = 0
            row["discarded"] = counts.get(DISCARDED, 0)
        out.append(row)
    return out
