"""The Cleanup screen's data: each broker's commit-log segments and which have expired
and, for those a run would delete, which consumer groups lose how many unconsumed messages
(deleteExpiredCommitLog's own plan, read from outside as the CLI reads it)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.operations import cleanup_loss, store
from mqadmin.operations.targets import masters
from mqadmin.operations.times import format_time

Row = dict[str, Any]


async def read_segments(admin: MQAdmin) -> list[Row]:
    found = await masters(admin, or_slave=True)
    logs = await asyncio.gather(*(store.commit_log(admin, addr, with_losses=True)
                                  for addr in found.values()))
    rows: list[Row] = []
    for (name, addr), log in zip(found.items(), logs, strict=True):
        doomed = {s.name for s in log.doomed}
        for seg in log.segments:
            lost = [loss for loss in log.losses if loss.segment == seg.name]
            rows.append({"key": f"{addr}/{seg.name}", "brokerName": name, "addr": addr,
                         "file": seg.name, "fromOffset": seg.from_offset,
                         "toOffset": seg.to_offset, "bytes": seg.to_offset - seg.from_offset,
                         "lastWritten": format_time(seg.last_written) or "(being written)",
                         "expired": seg.expired, "deleted": seg.name in doomed,
                         "reservedHours": log.reserved_hours,
                         "unconsumed": sum(loss.messages for loss in lost) if seg.name in doomed
                         else None, "losses": cleanup_loss.summary(lost) or None})
    return rows
