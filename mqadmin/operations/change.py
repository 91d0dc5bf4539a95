"""The change runner: plan, confirm, apply, verify and audit, once for the CLI and the dashboard.

How this works: a `Change` knows one kind of change.  `plan(admin, where, progress)` reads
the servers (nothing changes) and returns a `Planned`: the rows to show, a risk that needs an
explicit acceptance, whether there is anything to do, the arguments the audit log records,
and the plan itself for `apply`, which makes the change, re-reads the servers and says how it
ended (an `Outcome`).  `run` puts the steps in order for a front-end (`Front`): each step
that talks to servers goes through its `call` (the CLI opens fresh connections for each, the
dashboard uses its backend), it shows the progress of planning and applying, and it supplies
the confirmation (the CLI by prompt or --yes, the dashboard by its dialog; a plan confirmed
before, such as a resend batch being resumed, is not asked again).  Once applying has
started, exactly one audit record is written (`audit`, the only writer; the history module
masks secrets), whatever happens; a change not confirmed (or a dry run, or a plan with
nothing to do) changes and records nothing.  No front-end code lives here: no printing, no
widgets.  The changes themselves live with their operations (`MutationChange` here,
`ha.replication.SwitchChange`, `dlq.resend.ResendChange` / `ResumeChange`,
`dlq.discard.DiscardChange`, `dlq.transfer.ImportChange`, `messages.send.SendChange`,
`messages.redeliver`'s `ConsumeDirectlyChange`, `ResendToGroupChange`, `SendAgainChange`,
`ha.controller`'s `ElectMasterChange`, `CleanBrokerMetadataChange`,
`UpdateControllerConfigChange`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from engine.client.admin.cluster import MQAdmin
from mqadmin import history
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, ExitCode, exit_code_for, message_for
from mqadmin.operations import mutation as mut

Row = dict[str, Any]
P = TypeVar("P")
T = TypeVar("T")
Work = Callable[[MQAdmin], Awaitable[T]]


class Progress(Protocol):
    """Where a change reports while it plans or applies: servers (or letters) done, or a
    step."""

    def count(self, done: int, total: int) -> None: ...

    def step(self, text: str) -> None: ...


class Unseen:
    """Progress that nobody is shown."""

    def count(self, done: int, total: int) -> None:
        pass

    def step(self, text: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Planned(Generic[P]):
    """What a change will do (nothing has changed yet), and the plan `apply` carries out."""

    plan: P
    action: str  # Apache's command name, for messages and the audit log
    target: str  # what changes
    args: Mapping[str, Any]  # the arguments as the audit log records them (secrets masked there)
    rows: list[Row]
    columns: tuple[str, ...]
    details: list[Row] = field(default_factory=list)
    detail_columns: tuple[str, ...] = ()
    noun: str = "servers"  # what the change goes to, for the confirmation question
    risk: str = ""  # when set, applying needs an explicit acceptance of it
    nothing: str = ""  # when set, there is nothing to apply (why, as "no dead letter to ...")
    confirmed: bool = False  # confirmed before (a batch resumed): applied without asking
    #: What applying counts with `Progress.count` ("" when it counts nothing), for a
    #: front-end that tells counts in words.
    counted: str = "servers changed"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How applying ended: the verified rows, the audit outcome (applied, partial,
    unverified, failed) and the error, if any; `audit_warning` when the audit log could
    not be written (the change is made by then, so that is never an error)."""

    rows: list[Row]
    columns: tuple[str, ...]
    outcome: str = "applied"
    error: Exception | None = None
    target: str | None = None  # the audited target when not the plan's (a dlq batch)
    audit_warning: str = ""
    details: list[Row] = field(default_factory=list)  # what went wrong, item by item
    detail_columns: tuple[str, ...] = ()

    @classmethod
    def failed(cls, error: Exception, rows: list[Row] | None = None,
               columns: tuple[str, ...] = ()) -> Outcome:
        return cls(rows or [], columns, "failed", error)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def exit_code(self) -> int:
        return int(exit_code_for(self.error)) if self.error is not None else int(ExitCode.OK)

    @property
    def message(self) -> str:
        return message_for(self.error) if self.error is not None else ""


class Change(Protocol[P]):
    """One change: how it plans and how it applies a plan."""

    async def plan(self, admin: MQAdmin, where: Endpoint, progress: Progress) -> Planned[P]: ...

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[P],
                    progress: Progress) -> Outcome: ...


class Front(Protocol):
    """What a front-end supplies to `run`: connections, the confirmation, progress."""

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def via(self) -> str | None:
        """Recorded in the audit arguments as ``via`` (None for the CLI: its records are
        the command's own parameters)."""

    async def call(self, work: Work[T]) -> T: ...

    async def confirm(self, planned: Planned[Any]) -> bool:
        """Show the plan and decide: True applies; False changes and records nothing (a
        plan with `nothing` to do is shown and never applied)."""

    def planning(self) -> AbstractContextManager[Progress]: ...

    def applying(self, planned: Planned[Any]) -> AbstractContextManager[Progress]: ...


async def run(change: Change[P], front: Front) -> Outcome | None:
    """Plan, confirm, apply and verify `change`, then audit how it ended.

    Returns:
        How it ended (an error in it once applying has started: the audit log has it), or
        None when the front-end did not confirm or the plan had nothing to do (nothing
        changed, nothing recorded).

    Raises:
        Exception: whatever planning or the confirmation raise (nothing changed).
    """
    where = front.endpoint
    with front.planning() as reading:
        planned = await front.call(lambda admin: change.plan(admin, where, reading))
    if not planned.confirmed and (not await front.confirm(planned) or planned.nothing):
        return None
    with front.applying(planned) as progress:
        try:
            outcome = await front.call(
                lambda admin: change.apply(admin, where, planned, progress))
        except Exception as exc:
            outcome = Outcome.failed(exc)
    args = {**planned.args, **({"via": front.via} if front.via else {})}
    warning = await asyncio.to_thread(
        audit, where, planned.action, args, outcome.target or planned.target,
        outcome=outcome.outcome, exit_code=outcome.exit_code, plan=planned.rows,
        result=outcome.rows, message=outcome.message)
    return dataclasses.replace(outcome, audit_warning=warning)


def audit(where: Endpoint | None, command: str, args: Mapping[str, Any], target: str, *,
          outcome: str, exit_code: int, plan: Sequence[Mapping[str, Any]] = (),
          result: Sequence[Mapping[str, Any]] = (), message: str = "") -> str:
    """Append one record to the audit log; returns a warning when it could not be written."""
    record = history.AuditRecord(command, args, target, outcome, int(exit_code), plan, result,
                                 where.context if where else None, where.text if where else "",
                                 message)
    try:
        history.append(record)
    except Exception as exc:  # sqlite3.Error, OSError: the audit log is not the change
        return f"could not append to the audit log {history.db_path()}: {exc}"
    return ""


class MutationChange:
    """A `Mutation` of the operations, built anew over the admin of each phase: planned on
    every server, then applied and verified on each one the plan could read."""

    def __init__(self, build: Callable[[MQAdmin], mut.Mutation[Any]],
                 args: Mapping[str, Any] | None = None, *,
                 risk: Callable[[mut.Plan[Any]], str] | None = None) -> None:
        self.build = build
        self.args = dict(args or {})
        self.risk = risk

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: Progress) -> Planned[mut.Plan[Any]]:
        planned = await mut.plan(self.build(admin))
        m = planned.mutation
        return Planned(planned, m.action, m.target, self.args, planned.rows, m.plan_columns,
                       planned.detail_rows, m.detail_columns, m.noun,
                       self.risk(planned) if self.risk is not None else "",
                       counted=f"{m.noun} changed")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[mut.Plan[Any]],
                    progress: Progress) -> Outcome:
        applied = await mut.apply(planned.plan.rebind(self.build(admin)), progress.count)
        try:
            mut.settle_applied(applied)
        except CliError as exc:
            return Outcome(applied.rows, applied.columns, applied.outcome, exc)
        return Outcome(applied.rows, applied.columns, applied.outcome)
