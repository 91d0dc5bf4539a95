"""Controller commands (5.3 controller mode), with Apache's names and flags:
getControllerMetaData, getSyncStateSet, getBrokerEpoch, electMaster, cleanBrokerMetadata,
getControllerConfig, updateControllerConfig (see `mqadmin/operations/ha/controller.py`).

The changes (electMaster, cleanBrokerMetadata, updateControllerConfig) go through the change
runner as every change does: their plan shown, asked (or --yes), applied, verified by reading
the controllers again, and one audit record."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Annotated, Any

import typer

from engine.client.admin.cluster import MQAdmin
from engine.remoting import loop
from mqadmin import render
from mqadmin.commands import Terminal, guarded, params, run, run_change
from mqadmin.config import Endpoint
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations import change
from mqadmin.operations.ha import controller as ops
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Controller"

ControllerOpt = Annotated[str, typer.Option(
    "-a", "--controllerAddress", help="The controller's address (several with ';').")]
BrokerNameOpt = Annotated[str, typer.Option(
    "-bn", "--brokerName", help="The broker set (broker name).")]
#: getSyncStateSet and getBrokerEpoch: one broker set, or every set of a cluster.
OneSetOpt = Annotated[str | None, typer.Option(
    "-b", "--brokerName", help="Which broker set.")]
EverySetOpt = Annotated[str | None, typer.Option(
    "-c", "--clusterName", help="Every broker set of this cluster (name servers).")]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _run(work: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_once(work)


@app.command("getControllerMetaData", rich_help_panel=PANEL)
def get_controller_metadata(controller: ControllerOpt, output: OutputOpt = OutputFormat.TABLE,
                            debug: DebugOpt = False) -> None:
    """Show the controller group: its leader and peers."""
    with guarded(debug):
        rows = _run(ops.metadata(ops.addresses(controller)))
        render.render(rows, output, columns=ops.META_COLUMNS)


@app.command("getSyncStateSet", rich_help_panel=PANEL)
def get_sync_state_set(
    controller: ControllerOpt,
    broker_name: OneSetOpt = None,
    cluster: EverySetOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show each broker set's master, epochs and SyncStateSet: one row per replica, in sync
    or behind, alive or not."""
    with guarded(debug):
        if not broker_name and not cluster:
            raise UsageProblem("getSyncStateSet needs -b brokerName or -c clusterName")
        names = [broker_name.strip()] if broker_name else run(
            namesrv, context, lambda admin: _cluster_brokers(admin, (cluster or "").strip()))
        rows = _run(ops.sync_state_sets(ops.addresses(controller), sorted(names)))
        if not rows:
            raise TargetNotFound(f"the controller knows no broker set named {', '.join(names)}"
                                 "; check -b, or that the brokers run in controller mode")
        render.render(rows, output, columns=ops.SYNC_COLUMNS)


async def _cluster_brokers(admin: MQAdmin, cluster: str) -> list[str]:
    info = await admin.namesrv.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if not names:
        raise TargetNotFound(f"no cluster named {cluster}; list them with `mqadmin "
                             "clusterList`")
    return sorted(names)


@app.command("getBrokerEpoch", rich_help_panel=PANEL)
def get_broker_epoch(
    broker_name: OneSetOpt = None,
    cluster: EverySetOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show each broker's epoch entries (where each master epoch began in its log)."""
    with guarded(debug):
        if not broker_name and not cluster:
            raise UsageProblem("getBrokerEpoch needs -b brokerName or -c clusterName")

        async def members(admin: MQAdmin) -> list[tuple[str, str]]:
            info = await admin.namesrv.cluster_info()
            names = ([broker_name.strip()] if broker_name
                     else await _cluster_brokers(admin, (cluster or "").strip()))
            out = [(n, addr) for n in names if n in info.broker_addr_table
                   for _, addr in sorted(info.broker_addr_table[n].broker_addrs.items())]
            if not out:
                raise TargetNotFound(f"no broker named {', '.join(names)} at the name "
                                     "servers; list them with `mqadmin clusterList`")
            return out

        rows = _run(ops.broker_epochs(run(namesrv, context, members)))
        render.render(rows, output, columns=ops.EPOCH_COLUMNS)


def _change(controller: str, chg: change.Change[Any], yes: bool, dry_run: bool,
            output: OutputFormat) -> None:
    """`chg` through the change runner from the terminal; the audit log records the
    controllers' addresses as where it went."""
    run_change(Terminal(Endpoint(ops.addresses(controller)), yes, output, dry_run), chg)


@app.command("electMaster", rich_help_panel=PANEL)
def elect_master(
    ctx: typer.Context,
    controller: ControllerOpt,
    broker_id: Annotated[int, typer.Option(
        "-b", "--brokerId", help="The id of the broker to make master.")],
    broker_name: BrokerNameOpt,
    cluster: Annotated[str, typer.Option("-c", "--clusterName", help="The broker's cluster.")],
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Make broker `-b` the master of its set (it must be alive and in the SyncStateSet)."""
    with guarded(debug):
        _change(controller, ops.ElectMasterChange(controller, cluster, broker_name, broker_id,
                                                  _now_ms, params(ctx)), yes, dry_run, output)


@app.command("cleanBrokerMetadata", rich_help_panel=PANEL)
def clean_broker_metadata(
    ctx: typer.Context,
    controller: ControllerOpt,
    broker_name: BrokerNameOpt,
    ids: Annotated[str | None, typer.Option(
        "-b", "--brokerControllerIdsToClean",
        help="The ids to forget, e.g. '1;2' (default: the whole set).")] = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--clusterName", help="The broker's cluster.")] = None,
    living: Annotated[bool, typer.Option(
        "-l", "--cleanLivingBroker", help="Also forget brokers that are alive.")] = False,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Make the controller forget a broker set, or some of its brokers."""
    with guarded(debug):
        _change(controller, ops.CleanBrokerMetadataChange(
            controller, cluster, broker_name, ids, living, _now_ms, params(ctx)),
            yes, dry_run, output)


@app.command("getControllerConfig", rich_help_panel=PANEL)
def get_controller_config(controller: ControllerOpt, output: OutputOpt = OutputFormat.TABLE,
                          debug: DebugOpt = False) -> None:
    """Show every controller's settings."""
    with guarded(debug):
        rows = _run(ops.controller_config(ops.addresses(controller)))
        render.render(rows, output, columns=ops.CONFIG_COLUMNS)


@app.command("updateControllerConfig", rich_help_panel=PANEL)
def update_controller_config(
    ctx: typer.Context,
    controller: ControllerOpt,
    key: Annotated[str, typer.Option("-k", "--key", help="The setting.")],
    value: Annotated[str, typer.Option("-v", "--value", help="Its new value.")],
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Change one setting on every controller of -a."""
    with guarded(debug):
        _change(controller, ops.UpdateControllerConfigChange(controller, key, value,
                                                             params(ctx)), yes, dry_run,
                output)
