"""Replication commands: haStatus, switchover, failover (see `mqadmin/operations/ha/replication.py`;
the switches run through the change runner, as the dashboard's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from engine.client.admin import MQAdmin
from mqadmin import render
from mqadmin.commands import Terminal, endpoint, guarded, params, run_change, with_admin
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.change import Planned
from mqadmin.operations.ha import replication as ops
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Replication"

BrokerNameOpt = Annotated[str, typer.Option("-b", "--brokerName", help="Broker name.")]
SlaveOpt = Annotated[str | None, typer.Option(
    "-s", "--slave", metavar="HOST:PORT",
    help="The slave to promote (default: the most advanced one).")]


@app.command("haStatus", rich_help_panel=PANEL)
def ha_status(
    broker_name: Annotated[str | None, typer.Option(
        "-b", "--brokerName",
        help="Only this broker name, or only the broker at this address (Apache 5's -b).")
    ] = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--clusterName", help="Only the brokers of this cluster.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show replication: for a master one row per connected slave (its acknowledged offset,
    bytes / estimated messages / estimated seconds behind, connection age); for a slave one
    row towards its master (peerOffset: the highest master offset it saw; behind: what it
    lacks of it)."""
    with guarded(debug):
        where = endpoint(namesrv, context)

        async def work(admin: MQAdmin) -> list[ops.Row]:
            if broker_name:
                name, addr = await ops.broker_name_of(admin, broker_name.strip())
                rows = await ops.status_of(admin, [name])
                return [r for r in rows if r["addr"] == addr] if addr else rows
            names = await ops.cluster_broker_names(admin, cluster.strip()) if cluster else None
            return await ops.status_of(admin, names)

        rows = with_admin(where, work)
        render.render(rows, output, columns=ops.STATUS_COLUMNS)
        for warning in ops.status_warnings(rows):
            render.warn(warning)


@app.command("switchover", rich_help_panel=PANEL)
def switchover(
    ctx: typer.Context,
    broker_name: BrokerNameOpt,
    slave: SlaveOpt = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, metavar="SECONDS",
        help="How long the slave may take to catch up once writes stop.")] = 30.0,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Make a slave the master of a broker name without losing a message.

    Writes stop (write permission wiped, the master fenced) until the slave has every byte,
    then the slave is promoted (a new epoch), the old master follows it as a slave, and
    write permission comes back.  Each step is printed with its time on stderr; a failure
    before the promotion rolls everything back.
    """
    with guarded(debug):
        change = ops.SwitchChange(broker_name.strip(), slave=slave, catch_up_timeout=timeout,
                                  args=params(ctx))
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run), change,
                   empty_rows=True)


@app.command("failover", rich_help_panel=PANEL)
def failover(
    ctx: typer.Context,
    broker_name: BrokerNameOpt,
    slave: SlaveOpt = None,
    accept_loss: Annotated[bool, typer.Option(
        "--accept-loss",
        help="Promote even though the estimated loss is not zero.")] = False,
    role: Annotated[str, typer.Option(
        "--role", help="Role of the new master: ASYNC_MASTER or SYNC_MASTER.")]
    = "ASYNC_MASTER",
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Promote a slave of a broker name whose master is dead.

    The plan shows the estimated loss: the bytes (and messages) the dead master is known to
    have had that the slave never received.  A non-zero estimate needs --accept-loss.  The
    old master, when it returns, finds a newer epoch at the name servers, becomes a slave
    and drops what it wrote after the promoted slave's last byte.
    """
    with guarded(debug):
        if role not in ("ASYNC_MASTER", "SYNC_MASTER"):
            raise UsageProblem(f"--role {role}: use ASYNC_MASTER or SYNC_MASTER")
        change = ops.SwitchChange(broker_name.strip(), failover=True, slave=slave, role=role,
                                  args=params(ctx))
        run_change(_Failover(endpoint(namesrv, context), yes, output, dry_run,
                             accept_loss=accept_loss), change, empty_rows=True)


@dataclass(frozen=True, slots=True)
class _Failover(Terminal):
    """The terminal for a failover: a plan that loses data needs --accept-loss."""

    accept_loss: bool = False

    async def confirm(self, planned: Planned[Any]) -> bool:
        """Raises: LossNotAccepted (the plan shown, nothing changed)."""
        plan: ops.SwitchPlan = planned.plan
        if planned.risk and not self.accept_loss and not self.dry_run:
            render.plan("failover plan:", planned.rows, planned.columns)
            raise ops.LossNotAccepted(
                f"promoting {plan.slave.addr} loses an estimated {plan.behind_bytes} bytes "
                f"(~{plan.behind_messages} messages) the dead master had; re-run with "
                "--accept-loss to accept that, or bring the master back.")
        return await Terminal.confirm(self, planned)
