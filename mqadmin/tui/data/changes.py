"""Changes the dashboard makes, each a `Change` for the change runner (operations/change.py),
which plans, applies, verifies and audits them exactly as it does for the CLI (the dashboard
has no other way to change a cluster).

How this works: `MutationChange` (topics, offsets, cleanup) is the operations' own, as the
CLI runs it; `SwitchChange` wraps the replication operations' switchover and failover, whose
timeline steps are reported as they happen.  The change dialog is the runner's front-end.
"""

from __future__ import annotations

from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.operations import ha
from mqadmin.operations.change import MutationChange, Outcome, Planned, Progress

__all__ = ["MutationChange", "SwitchChange"]


class SwitchChange:
    """A switchover (the master is alive) or a failover (it is dead), with its timeline."""

    def __init__(self, broker_name: str, *, failover: bool = False, slave: str | None = None,
                 role: str = "ASYNC_MASTER", catch_up_timeout: float = 30.0) -> None:
        self.action = "failover" if failover else "switchover"
        self.broker_name = broker_name
        self.failover = failover
        self.slave = slave
        self.role = role
        self.catch_up_timeout = catch_up_timeout

    async def plan(self, admin: MQAdmin, where: Endpoint) -> Planned[ha.SwitchPlan]:
        if self.failover:
            plan = await ha.plan_failover(admin, self.broker_name, self.slave, self.role)
        else:
            plan = await ha.plan_switchover(admin, self.broker_name, self.slave)
        risk = ""
        if self.failover and plan.behind_bytes:
            risk = (f"Promoting {plan.slave.addr} loses an estimated {plan.behind_bytes:,} "
                    f"bytes (≈ {plan.behind_messages:,} messages) that the dead master had "
                    "and no slave received.")
        # the arguments of `mqadmin failover` / `switchover`, as the CLI records them
        args: dict[str, Any] = {"broker_name": self.broker_name, "slave": self.slave}
        if self.failover:  # a loss in the plan must be accepted in the dialog to apply
            args |= {"accept_loss": bool(plan.behind_bytes), "role": self.role}
        else:
            args["timeout"] = self.catch_up_timeout
        return Planned(plan, self.action, self.broker_name, args, plan.rows, ha.PLAN_COLUMNS,
                       noun="brokers and name servers", risk=risk)

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[ha.SwitchPlan],
                    progress: Progress) -> Outcome:
        timeline = ha.Timeline(progress.step)
        try:
            if self.failover:
                rows = await ha.failover(admin, planned.plan, timeline)
            else:
                rows = await ha.switchover(admin, planned.plan, timeline,
                                           self.catch_up_timeout)
        except Exception as exc:
            return Outcome.failed(exc, timeline.rows, ha.STEP_COLUMNS)
        return Outcome(rows, ha.STEP_COLUMNS)
