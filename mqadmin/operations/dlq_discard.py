"""Discarding dead letters: marking them handled in the ledger without resending (nothing is
deleted; `dlq list` stops counting them as unhandled)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.client.admin import MQAdmin
from mqadmin.exit_codes import UsageProblem
from mqadmin.history import who
from mqadmin.operations.dlq_ledger import DISCARDED, Batch, Ledger, new_batch_id, now_iso
from mqadmin.operations.dlq_model import DeadLetter, Filters, Row, counts_by
from mqadmin.operations.dlq_read import read_all
from mqadmin.operations.mutation import Progress

PLAN_COLUMNS = ("group", "deadLetters", "alreadyHandled", "originTopics", "reason")


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
