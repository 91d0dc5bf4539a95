"""Changes the dashboard makes, each through the operations' own plan / apply / verify and
appended to the audit log exactly as the CLI does (the dashboard has no other way to change
a cluster).

How this works: a `Change` plans (reads the servers, nothing changes) and applies (changes,
re-reads, verifies, audits).  `MutationChange` wraps any `operations.mutation.Mutation`
builder (topics, offsets, cleanup); `SwitchChange` wraps the replication operations'
switchover and failover with their timeline.  Both return plain rows for the screens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.client.admin import MQAdmin
from mqadmin import history
from mqadmin.exit_codes import CliError, ExitCode, exit_code_for, message_for
from mqadmin.operations import ha
from mqadmin.operations import mutation as mut
from mqadmin.tui.backend import Backend

Row = dict[str, Any]
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class PlanView:
    """What a change will do, as rows; `risk` (when set) needs an explicit acceptance."""

    rows: list[Row]
    columns: tuple[str, ...]
    details: list[Row] = field(default_factory=list)
    detail_columns: tuple[str, ...] = ()
    risk: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a change ended: the verified rows, the audit outcome, an error message if any."""

    rows: list[Row]
    columns: tuple[str, ...]
    outcome: str
    error: str = ""
    audit_warning: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


class Change(Protocol):
    action: str
    target: str

    async def plan(self, backend: Backend) -> PlanView: ...

    async def apply(self, backend: Backend, say: Say) -> Outcome: ...


async def audit(backend: Backend, action: str, args: Mapping[str, Any], target: str, *,
                outcome: str, exit_code: int, plan: Sequence[Row], result: Sequence[Row],
                message: str = "") -> str:
    """Append to the audit log; returns a warning when it could not be written (the change
    is made by then, so that is never an error)."""
    where = backend.endpoint
    record = history.AuditRecord(action, {**args, "via": "dashboard"}, target, outcome,
                                 int(exit_code), plan, result, where.context, where.text,
                                 message)
    try:
        await backend.blocking(lambda: history.append(record))
    except Exception as exc:  # sqlite3.Error, OSError
        return f"could not append to the audit log {history.db_path()}: {exc}"
    return ""


class MutationChange:
    """A `Mutation` from the operations: plan, then apply and verify on every server."""

    def __init__(self, build: Callable[[MQAdmin], mut.Mutation[Any]], args: Mapping[str, Any],
                 *, action: str, target: str,
                 risk: Callable[[mut.Plan[Any]], str] | None = None) -> None:
        self.build = build
        self.args = dict(args)
        self.action = action
        self.target = target
        self.risk = risk
        self._planned: mut.Plan[Any] | None = None

    async def plan(self, backend: Backend) -> PlanView:
        planned = await backend.call(lambda admin: mut.plan(self.build(admin)))
        self._planned = planned
        m = planned.mutation
        self.action, self.target = m.action, m.target
        risk = self.risk(planned) if self.risk is not None else ""
        return PlanView(planned.rows, m.plan_columns, planned.detail_rows, m.detail_columns,
                        risk)

    async def apply(self, backend: Backend, say: Say) -> Outcome:
        planned = self._planned
        assert planned is not None, "plan first"

        def progress(done: int, total: int) -> None:
            say(f"{done} of {total} servers changed")

        try:
            applied = await backend.call(
                lambda admin: mut.apply(planned.rebind(self.build(admin)), progress))
        except Exception as exc:
            warning = await audit(backend, self.action, self.args, self.target,
                                  outcome="failed", exit_code=exit_code_for(exc),
                                  plan=planned.rows, result=[], message=message_for(exc))
            return Outcome([], (), "failed", message_for(exc), warning)
        error, code = "", ExitCode.OK
        try:
            mut.settle_applied(applied)
        except CliError as exc:
            error, code = str(exc), exc.code
        warning = await audit(backend, self.action, self.args, self.target,
                              outcome=applied.outcome, exit_code=code, plan=planned.rows,
                              result=applied.rows, message=error)
        return Outcome(applied.rows, applied.columns, applied.outcome, error, warning)


class SwitchChange:
    """A switchover (the master is alive) or a failover (it is dead), with its timeline."""

    def __init__(self, broker_name: str, *, failover: bool = False, slave: str | None = None,
                 role: str = "ASYNC_MASTER", catch_up_timeout: float = 30.0) -> None:
        self.action = "failover" if failover else "switchover"
        self.target = broker_name
        self.failover = failover
        self.slave = slave
        self.role = role
        self.catch_up_timeout = catch_up_timeout
        self._plan: ha.SwitchPlan | None = None

    @property
    def args(self) -> dict[str, Any]:
        return {"broker_name": self.target, "slave": self.slave,
                **({"role": self.role} if self.failover else {})}

    async def plan(self, backend: Backend) -> PlanView:
        if self.failover:
            plan = await backend.call(lambda admin: ha.plan_failover(
                admin, self.target, self.slave, self.role))
        else:
            plan = await backend.call(lambda admin: ha.plan_switchover(
                admin, self.target, self.slave))
        self._plan = plan
        risk = ""
        if self.failover and plan.behind_bytes:
            risk = (f"Promoting {plan.slave.addr} loses an estimated {plan.behind_bytes:,} "
                    f"bytes (≈ {plan.behind_messages:,} messages) that the dead master had "
                    "and no slave received.")
        return PlanView(plan.rows, ha.PLAN_COLUMNS, risk=risk)

    async def apply(self, backend: Backend, say: Say) -> Outcome:
        plan = self._plan
        assert plan is not None, "plan first"
        timeline = ha.Timeline(say)
        args = self.args | ({"accept_loss": True} if plan.behind_bytes else {})
        try:
            if self.failover:
                rows = await backend.call(lambda admin: ha.failover(admin, plan, timeline))
            else:
                rows = await backend.call(lambda admin: ha.switchover(
                    admin, plan, timeline, self.catch_up_timeout))
        except Exception as exc:
            warning = await audit(backend, self.action, args, self.target, outcome="failed",
                                  exit_code=exit_code_for(exc), plan=plan.rows,
                                  result=timeline.rows, message=message_for(exc))
            return Outcome(timeline.rows, ha.STEP_COLUMNS, "failed", message_for(exc), warning)
        warning = await audit(backend, self.action, args, self.target, outcome="applied",
                              exit_code=ExitCode.OK, plan=plan.rows, result=rows)
        return Outcome(rows, ha.STEP_COLUMNS, "applied", "", warning)
