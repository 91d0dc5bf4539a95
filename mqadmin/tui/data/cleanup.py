"""The Cleanup screen's data: each broker's commit-log segments and which have expired
(deleteExpiredCommitLog's own plan, read from outside as the CLI reads it)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.operations import store
from mqadmin.operations.times import format_time
from mqadmin.tui.data.consume import masters

Row = dict[str, Any]


async def read_segments(admin: MQAdmin) -> list[Row]:
    found = await masters(admin)
    logs = await asyncio.gather(*(store.commit_log(admin, addr) for addr in found.values()))
    rows: list[Row] = []
    for (name, addr), log in zip(found.items(), logs, strict=True):
        doomed = {s.name for s in log.doomed}
        for seg in log.segments:
            rows.append({"key": f"{addr}/{seg.name}", "brokerName": name, "addr": addr,
                         "file": seg.name, "fromOffset": seg.from_offset,
                         "toOffset": seg.to_offset, "bytes": seg.to_offset - seg.from_offset,
                         "lastWritten": format_time(seg.last_written) or "(being written)",
                         "expired": seg.expired, "deleted": seg.name in doomed,
                         "reservedHours": log.reserved_hours})
    return rows
