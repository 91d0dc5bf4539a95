"""A message's trace as a timeline for the message screen: sent, stored, the transaction's
end, each group's delivery and consumption with status, client and cost.

How this works: the trace records are the ones `mqadmin queryMsgTraceById` reads
(`operations.messages.trace.query_trace`, any writer: Apache's clients or ours); the message
itself gives the step no trace records, its storing, and, when the message was not traced,
its sending (born time and host, without status or cost).  A message without a trace still has a
timeline of those two steps, with the lookup's reason as its note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.protocol.message import MessageRecord
from mqadmin.exit_codes import CliError, TargetNotFound, message_for
from mqadmin.operations.messages.trace import query_trace

Row = dict[str, Any]
#: What each trace record's type is called on the timeline.
STEP_OF = {"Pub": "sent", "EndTransaction": "transaction ended", "SubBefore": "delivered",
           "SubAfter": "consumed", "Recall": "recalled"}
#: Order of steps in the same millisecond.
_ORDER = {"sent": 0, "stored": 1, "transaction ended": 2, "delivered": 3, "consumed": 4,
          "recalled": 5}


@dataclass(frozen=True, slots=True)
class Step:
    """One moment in a message's life."""

    at: int  # ms since the epoch
    step: str  # sent, stored, transaction ended, delivered, consumed, recalled
    group: str  # the producer group (sent) or consumer group
    client: str  # the client's host, or the storing broker's address
    status: str  # success / failed, the transaction's state, the retry count
    cost_ms: int | None


@dataclass(frozen=True, slots=True)
class Timeline:
    steps: tuple[Step, ...]
    note: str = ""  # why there are no trace records, when there are none


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def _step(row: Row) -> Step:
    name = STEP_OF.get(str(row["type"]), str(row["type"]))
    status = str(row["status"] or "")
    if name == "delivered" and row["retryTimes"]:
        status = f"retry {row['retryTimes']}"
    return Step(int(row["timestamp"] or 0), name, str(row["group"] or ""),
                str(row["clientHost"] or ""), status, row["costMs"])


def timeline(record: MessageRecord, rows: list[Row], note: str = "") -> Timeline:
    """The steps of `record` from its trace `rows` (none: the message's own two steps)."""
    steps = [Step(record.store_timestamp, "stored", "", _host(record.store_host), "", None)]
    steps.extend(_step(r) for r in rows)
    if not any(s.step == "sent" for s in steps):
        steps.append(Step(record.born_timestamp, "sent", "", _host(record.born_host), "", None))
    steps.sort(key=lambda s: (s.at, _ORDER.get(s.step, 9)))
    return Timeline(tuple(steps), note)


async def read_timeline(admin: MQAdmin, record: MessageRecord) -> Timeline:
    """The timeline of `record`, its trace read from the default trace topic."""
    try:
        lookup = await query_trace(admin, record.msg_id, record=record)
    except TargetNotFound as exc:
        return timeline(record, [], str(exc))
    except (ClientError, CliError, TimeoutError, OSError) as exc:  # own steps still show
        return timeline(record, [], f"trace not read: {message_for(exc)}")
    return timeline(record, lookup.rows)
