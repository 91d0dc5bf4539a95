"""The Dead letters screens' data and changes, all through the dead-letter operations and
their ledger (dlq list / show / status / resend / discard / export, as the CLI runs them).

How this works: the ledger (SQLite) is opened for each call on the backend thread and
closed after it, so no connection crosses threads.  A resend or discard is a `Change`:
planning reads the dead letters chosen (by message id, or all of the group) and leaves out
those the ledger records as handled; applying writes the ledger batch ahead, sends (or
marks); the change runner appends the same audit record as `mqadmin dlq resend` / `discard`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, ExitCode, TargetNotFound
from mqadmin.operations import dlq_discard, dlq_list, dlq_resend, dlq_show, dlq_status, dlq_transfer
from mqadmin.operations.change import Outcome, Planned, Progress
from mqadmin.operations.dlq_ledger import ledger_of
from mqadmin.operations.dlq_model import Filters

Row = dict[str, Any]
#: Dead letters read for the group screen (the newest are at the end of each queue).
LETTERS_LIMIT = 2000
RESEND_COLUMNS = ("batch", "total", "sent", "alreadyOnTarget", "failed")


@dataclass(frozen=True, slots=True)
class DlqView:
    groups: list[Row]
    batches: list[Row] = field(default_factory=list)


async def read_dlq(admin: MQAdmin, endpoint: Endpoint) -> DlqView:
    """Every group with dead letters (dlq list) and the newest batches (dlq status)."""
    with ledger_of(endpoint) as ledger:
        groups = await dlq_list.list_groups(admin, ledger)
        batches = await dlq_status.status(admin, ledger, limit=20)
    return DlqView(groups, batches)


async def read_letters(admin: MQAdmin, endpoint: Endpoint, group: str) -> list[Row]:
    """The group's dead letters (dlq show with whole bodies), each with a one-line preview."""
    with ledger_of(endpoint) as ledger:
        rows = await dlq_show.show(admin, group, Filters(limit=LETTERS_LIMIT), ledger=ledger,
                                   full_body=True)
    for row in rows:
        flat = " ".join(str(row["body"]).split())
        row["preview"] = flat if len(flat) <= 60 else flat[:59] + "…"
    return rows


async def export_letters(admin: MQAdmin, group: str, ids: frozenset[str] | None,
                         path: Path) -> int:
    """dlq export of the chosen dead letters (all when `ids` is None) to `path`."""
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            count = await dlq_transfer.export(admin, group, out, Filters(ids=ids))
        partial.replace(path)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}.") from None
    finally:
        partial.unlink(missing_ok=True)
    return count


class ResendIncomplete(CliError):
    """Some copies were not sent: the ledger records each, `--resume` finishes the batch."""

    code = ExitCode.PARTIAL


class ResendChange:
    """dlq resend of the chosen dead letters, to the group's retry topic or the original."""

    def __init__(self, group: str, ids: frozenset[str] | None, *, to: str = "retry") -> None:
        self.group = group
        self.ids = ids
        self.to = to

    @property
    def args(self) -> dict[str, Any]:
        return {"group": self.group, "to": self.to,
                "ids": sorted(self.ids) if self.ids is not None else "all"}

    async def plan(self, admin: MQAdmin, where: Endpoint) -> Planned[dlq_resend.ResendPlan]:
        with ledger_of(where) as ledger:
            plan = await dlq_resend.plan_resend(admin, ledger, self.group,
                                                Filters(ids=self.ids), to=self.to)
        if not plan.letters:
            raise TargetNotFound(f"no dead letter of {self.group} to resend: {plan.skipped} "
                                 "already resent or discarded (the CLI's --again resends "
                                 "them once more).")
        others = sorted({g for gs in plan.other_groups.values() for g in gs})
        details = [{"note": f"{plan.skipped} already resent or discarded are left out"}] \
            if plan.skipped else []
        if others:
            details.append({"note": f"groups {', '.join(others)} also receive the copies"})
        return Planned(plan, "dlq resend", self.group, self.args, plan.rows(),
                       dlq_resend.PLAN_COLUMNS, details, ("note",), noun="cluster")

    async def apply(self, admin: MQAdmin, where: Endpoint,
                    planned: Planned[dlq_resend.ResendPlan], progress: Progress) -> Outcome:
        def sent(done: int, total: int) -> None:
            progress.step(f"{done} of {total} sent")

        def started(batch: str) -> None:
            progress.step(f"batch {batch} written to the ledger (`mqadmin dlq resend --resume "
                          f"{batch}` finishes it if interrupted)")

        with ledger_of(where) as ledger:
            outcome = await dlq_resend.resend(admin, ledger, planned.plan, on_progress=sent,
                                              on_batch=started)
        if not outcome.failed:
            return Outcome([outcome.row()], RESEND_COLUMNS, target=outcome.batch)
        error = ResendIncomplete(
            f"{len(outcome.failed)} of {outcome.total} were not resent (the ledger records "
            f"each): finish with `mqadmin dlq resend --resume {outcome.batch}`.")
        return Outcome([outcome.row()], RESEND_COLUMNS, "partial", error, outcome.batch)


class DiscardChange:
    """dlq discard: mark the chosen dead letters handled, with a reason (nothing deleted)."""

    def __init__(self, group: str, ids: frozenset[str] | None, reason: str) -> None:
        self.group = group
        self.ids = ids
        self.reason = reason

    async def plan(self, admin: MQAdmin, where: Endpoint) -> Planned[dlq_discard.DiscardPlan]:
        with ledger_of(where) as ledger:
            plan = await dlq_discard.plan_discard(admin, ledger, self.group, self.reason,
                                                  Filters(ids=self.ids))
        if not plan.letters:
            raise TargetNotFound(f"no dead letter of {self.group} left to discard "
                                 f"({plan.skipped} already resent or discarded).")
        args = {"group": self.group, "reason": self.reason,
                "ids": sorted(self.ids) if self.ids is not None else "all"}
        return Planned(plan, "dlq discard", self.group, args, plan.rows(),
                       dlq_discard.PLAN_COLUMNS, noun="ledger")

    async def apply(self, admin: MQAdmin, where: Endpoint,
                    planned: Planned[dlq_discard.DiscardPlan], progress: Progress) -> Outcome:
        def work() -> str:
            with ledger_of(where) as ledger:
                return dlq_discard.discard(ledger, planned.plan)

        batch = await asyncio.to_thread(work)
        row = {"batch": batch, "group": planned.plan.group,
               "discarded": len(planned.plan.letters)}
        return Outcome([row], ("batch", "group", "discarded"), target=batch)
