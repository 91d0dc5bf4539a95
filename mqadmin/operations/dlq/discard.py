"""Discarding dead letters: marking them handled in the ledger without resending (nothing is
deleted; `dlq list` stops counting them as unhandled); `DiscardChange` is a discard as the
change runner's `Change`, for `mqadmin dlq discard` and the dashboard alike."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.exit_codes import UsageProblem
from mqadmin.history import who
from mqadmin.operations import change
from mqadmin.operations.dlq.ledger import DISCARDED, Batch, Ledger, ledger_of, new_batch_id, now_iso
from mqadmin.operations.dlq.model import DeadLetter, Filters, Row, counts_by
from mqadmin.operations.dlq.read import read_all
from mqadmin.operations.mutation import Progress

PLAN_COLUMNS = ("group", "deadLetters", "alreadyHandled", "originTopics", "reason")
RESULT_COLUMNS = ("batch", "group", "discarded")


@dataclass(frozen=True, slots=True)
class DiscardPlan:
    group: str
    letters: tuple[DeadLetter, ...]
    skipped: int
    reason: str
    filters: Filters

    def rows(self) -> list[Row]:
        return [{"group": self.group, "deadLetters": len(self.letters),
                 "alreadyHandled": self.skipped,
                 "originTopics": counts_by([d.origin_topic for d in self.letters], 5) or None,
                 "reason": self.reason}]


async def plan_discard(admin: MQAdmin, ledger: Ledger, group: str, reason: str,
                       filters: Filters | None = None, *,
                       on_progress: Progress | None = None) -> DiscardPlan:
    """The dead letters `discard` would mark (those not resent or discarded already).

    Raises:
        UsageProblem: no reason given.
        TargetNotFound: the group has no dead-letter topic.
    """
    if not reason.strip():
        raise UsageProblem("--reason needs a text saying why these dead letters need no "
                           "resend (it is kept in the ledger).")
    filters = filters or Filters()
    letters = await read_all(admin, group, filters, on_progress=on_progress)
    handled = ledger.handled(group)
    chosen = tuple(d for d in letters if d.key not in handled)
    return DiscardPlan(group, chosen, len(letters) - len(chosen), reason.strip(), filters)


def discard(ledger: Ledger, plan: DiscardPlan) -> str:
    """Write the plan's dead letters as ``discarded`` in a new batch; returns its id."""
    batch_id = new_batch_id()
    at = now_iso()
    batch = Batch(batch_id, ledger.scope, plan.group, "discard", "-", plan.filters.describe(),
                  who(), at, len(plan.letters), plan.reason)
    ledger.open_batch(batch, [{"dl_key": d.key, "dl_msg_id": d.msg_id,
                               "dl_offset_msg_id": d.offset_msg_id,
                               "origin_topic": d.origin_topic, "state": DISCARDED,
                               "status": plan.reason} for d in plan.letters])
    return batch_id


class DiscardChange:
    """dlq discard: mark the dead letters `filters` choose handled, with a reason (nothing
    is deleted)."""

    def __init__(self, group: str, reason: str, filters: Filters | None = None, *,
                 args: dict[str, Any] | None = None) -> None:
        """`args`: what the audit log records (default: group, reason and the ids chosen)."""
        self.group = group
        self.reason = reason
        self.filters = filters or Filters()
        ids = self.filters.ids
        self.args = args if args is not None else {
            "group": group, "reason": reason, "ids": sorted(ids) if ids is not None else "all"}

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: change.Progress) -> change.Planned[DiscardPlan]:
        with ledger_of(where) as ledger:
            plan = await plan_discard(admin, ledger, self.group, self.reason, self.filters,
                                      on_progress=progress.count)
        return change.Planned(plan, "dlq discard", self.group, self.args, plan.rows(),
                              PLAN_COLUMNS, noun="ledger", counted="",
                              nothing="" if plan.letters else "no dead letter left to discard")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: change.Planned[DiscardPlan],
                    progress: change.Progress) -> change.Outcome:
        def work() -> str:
            with ledger_of(where) as ledger:
                return discard(ledger, planned.plan)

        batch = await asyncio.to_thread(work)
        row = {"batch": batch, "group": planned.plan.group,
               "discarded": len(planned.plan.letters)}
        return change.Outcome([row], RESULT_COLUMNS, target=batch)
