"""Cluster and broker commands: clusterList, brokerStatus, get/updateBrokerConfig,
wipe/addWritePerm, brokerConsumeStats, statsAll, clusterRT."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import endpoint, guarded, mutate, params, run, with_admin
from mqadmin.operations import cluster as ops
from mqadmin.operations import namesrv as ns_ops
from mqadmin.operations.mutation import settle
from mqadmin.options import (
    BrokerAddrOpt,
    ClusterOpt,
    ContextOpt,
    DebugOpt,
    DryRunOpt,
    Flag,
    NamesrvOpt,
    OutputLongOpt,
    OutputOpt,
    YesOpt,
    one_target,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Cluster and brokers"

IntervalOpt = Annotated[int | None, typer.Option(
    "-i", "--interval", min=1, metavar="SECONDS",
    help="Print again every SECONDS until Ctrl-C.")]
RoundsOpt = Annotated[int | None, typer.Option(
    "--rounds", min=1, help="With -i: stop after this many rounds.")]
BrokerNameOpt = Annotated[str, typer.Option("-b", "--brokerName", help="Broker name.")]


def _watch(interval: int | None, rounds: int | None, show: Callable[[], None]) -> None:
    """Call `show` once, or every `interval` seconds until Ctrl-C or `rounds` rounds."""
    done = 0
    try:
        while True:
            show()
            done += 1
            if interval is None or (rounds is not None and done >= rounds):
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return  # the normal end of watching


@app.command("clusterList", rich_help_panel=PANEL)
def cluster_list(
    more: Annotated[bool, typer.Option(
        "-m", "--moreStats", help="Messages in and out yesterday and today instead.")] = False,
    interval: IntervalOpt = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--clusterName", help="Only this cluster.")] = None,
    rounds: RoundsOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List every broker of every cluster with its version, traffic and disk figures.

    Columns: inTPS/outTPS messages per second (last 10 s), pcWaitMs page-cache lock wait,
    hour the age of the oldest message kept, space the commit log's disk ratio.  A broker
    that does not answer keeps its row with empty figures (exit code 6).
    """
    with guarded(debug):
        where = endpoint(namesrv, context)
        columns = ops.CLUSTER_MORE_COLUMNS if more else ops.CLUSTER_COLUMNS

        def show() -> None:
            gathered = with_admin(where, lambda admin: ops.cluster_list(
                admin, more=more, cluster=cluster.strip() if cluster else None))
            render.render(gathered.rows, output, columns=columns)
            settle("clusterList", gathered)

        _watch(interval, rounds, show)


@app.command("brokerStatus", rich_help_panel=PANEL)
def broker_status(
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show every runtime figure of a broker (-b), or of every broker of a cluster (-c)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = run(namesrv, context, lambda admin: ops.broker_status(admin, b, c))
        render.render(gathered.rows, output, columns=ops.STATUS_COLUMNS)
        settle("brokerStatus", gathered)


@app.command("getBrokerConfig", rich_help_panel=PANEL)
def get_broker_config(
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the settings of a broker (-b), or of every broker of a cluster (-c)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = run(namesrv, context, lambda admin: ops.broker_config(admin, b, c))
        render.render(gathered.rows, output, columns=ops.CONFIG_COLUMNS)
        settle("getBrokerConfig", gathered)


@app.command("updateBrokerConfig", rich_help_panel=PANEL)
def update_broker_config(
    ctx: typer.Context,
    key: Annotated[str, typer.Option("-k", "--key", help="Setting name.")],
    value: Annotated[str, typer.Option("-v", "--value", help="New value.")],
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Change one setting of a broker (-b), or of every broker of a cluster (-c, masters and
    slaves, as Apache does), and read it back."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_broker_config(admin, b, c, key.strip(), value.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("wipeWritePerm", rich_help_panel=PANEL)
def wipe_write_perm(
    ctx: typer.Context,
    broker_name: BrokerNameOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Take write permission away from every topic of a broker, on every name server.

    Producers stop sending to the broker: use it before taking the broker down.
    """
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ns_ops.wipe_write_perm(admin.namesrv, broker_name.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("addWritePerm", rich_help_panel=PANEL)
def add_write_perm(
    ctx: typer.Context,
    broker_name: BrokerNameOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Give write permission back to every topic of a broker, on every name server."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ns_ops.add_write_perm(admin.namesrv, broker_name.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("brokerConsumeStats", rich_help_panel=PANEL)
def broker_consume_stats(
    broker_addr: Annotated[str, typer.Option("-b", "--brokerAddr", metavar="HOST:PORT",
                                             help="Broker address.")],
    timeout_ms: Annotated[int, typer.Option("-t", "--timeoutMillis", min=1,
                                            help="Request timeout in ms.")] = 50_000,
    level: Annotated[int, typer.Option("-l", "--level",
                                       help="Only queues lagging at least this much.")] = 0,
    order: Annotated[Flag, typer.Option("-o", "--order",
                                        help="Ordered topics only (true|false).")] = Flag.FALSE,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the lag of every group on every queue of one broker, and the broker's total."""
    with guarded(debug):
        rows, total = run(namesrv, context, lambda admin: ops.broker_consume_stats(
            admin, broker_addr.strip(), order=bool(order), level=level, timeout_ms=timeout_ms))
        render.render(rows, output, columns=ops.CONSUME_STATS_COLUMNS)
        render.note(f"Diff Total: {total}")


@app.command("statsAll", rich_help_panel=PANEL)
def stats_all(
    active: Annotated[bool, typer.Option("-a", "--activeTopic",
                                         help="Only topics with traffic today.")] = False,
    topic: Annotated[str | None, typer.Option("-t", "--topic", help="Only this topic.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show, per topic and consumer group, the backlog, TPS in and out and the messages of
    the last 24 hours."""
    with guarded(debug), render.progress("statsAll") as update:
        rows = run(namesrv, context, lambda admin: ops.stats_all(
            admin, active_only=active, topic=topic.strip() if topic else None,
            on_progress=update))
    render.render(rows, output, columns=ops.STATS_ALL_COLUMNS)


@app.command("clusterRT", rich_help_panel=PANEL)
def cluster_rt(
    amount: Annotated[int, typer.Option("-a", "--amount", min=1,
                                        help="Messages per broker.")] = 100,
    size: Annotated[int, typer.Option("-s", "--size", min=1,
                                      help="Message size in bytes.")] = 128,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster",
                                                help="Only this cluster.")] = None,
    print_log: Annotated[Flag, typer.Option(
        "-p", "--printLog", help="Add time and machine room columns (true|false).")
    ] = Flag.FALSE,
    machine_room: Annotated[str, typer.Option("-m", "--machineRoom",
                                              help="Machine room name for -p.")] = "noname",
    interval: IntervalOpt = None,
    rounds: RoundsOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Measure the send round trip to every broker: send messages to each broker's own topic
    and show the average time.  Once, or every -i seconds (Apache always repeats)."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        columns = ops.RT_LOG_COLUMNS if print_log else ops.RT_COLUMNS

        def show() -> None:
            with render.progress("clusterRT") as update:
                rows = with_admin(where, lambda admin: ops.cluster_rt(
                    admin, amount=amount, size=size, cluster=cluster.strip() if cluster else None,
                    machine_room=machine_room, on_progress=update))
            render.render(rows, output, columns=columns)

        _watch(interval, rounds, show)
