"""Store upkeep commands: cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.commands import endpoint, guarded, mutate, params
from mqadmin.operations import store as ops
from mqadmin.options import (
    BrokerAddrOpt,
    ContextOpt,
    DebugOpt,
    DryRunOpt,
    NamesrvOpt,
    OutputOpt,
    YesOpt,
    one_target,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Store"

StoreClusterOpt = Annotated[str | None, typer.Option(
    "-c", "--cluster", metavar="CLUSTER", help="Every master broker of this cluster.")]


@app.command("cleanExpiredCQ", rich_help_panel=PANEL)
def clean_expired_cq(
    ctx: typer.Context,
    broker_addr: BrokerAddrOpt = None,
    cluster: StoreClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Have a broker (-b) or a cluster's masters (-c) drop consume queues that lie wholly
    behind the commit log."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context), lambda admin: ops.clean_expired_cq(admin, b, c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteExpiredCommitLog", rich_help_panel=PANEL)
def delete_expired_commit_log(
    ctx: typer.Context,
    broker_addr: BrokerAddrOpt = None,
    cluster: StoreClusterOpt = None,
    wait: Annotated[float, typer.Option(
        "--wait", min=0, help="Seconds to wait for the broker to delete the files.")
    ] = ops.DEFAULT_WAIT,
    accept_loss: Annotated[bool, typer.Option(
        "--accept-loss", help="Delete even segments holding unconsumed messages (the audit "
                              "log keeps who lost what).")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Have a broker (-b) or a cluster's masters (-c) delete expired commit-log files now,
    whatever deleteWhen says.  --dry-run lists the files, offset ranges and bytes that would
    go (files older than fileReservedTime, oldest first, never the one being written) and,
    next to each, the consumer groups (retry and dead-letter topics included) that would
    lose unconsumed messages and how many.  Such a loss is refused (exit code 4) unless
    --accept-loss."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        refuse = not (dry_run or accept_loss)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_expired_commit_log(admin, b, c, wait=wait,
                                                           refuse_loss=refuse),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("cleanUnusedTopic", rich_help_panel=PANEL)
def clean_unused_topic(
    ctx: typer.Context,
    broker_addr: BrokerAddrOpt = None,
    cluster: StoreClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Have a broker (-b) or a cluster's masters (-c) drop the queues of topics they no
    longer have."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context), lambda admin: ops.clean_unused_topic(admin, b, c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))
