"""The Replication screen's data: every master/slave link, as `haStatus` reads it
(operations/ha/replication.py), each keyed by its two ends."""

from __future__ import annotations

from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.operations.ha import replication as ha

Row = dict[str, Any]


async def read_replication(admin: MQAdmin) -> list[Row]:
    rows = await ha.status_of(admin, None)
    return [dict(r, key=f"{r['addr']}>{r.get('peer') or ''}") for r in rows]
