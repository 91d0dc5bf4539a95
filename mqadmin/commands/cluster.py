"""Commands reading the cluster and topic routes from the name server: clusterList,
topicList, topicRoute."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.commands import guarded, with_admin
from mqadmin.operations import namesrv as ops
from mqadmin.options import DebugOpt, NamesrvOpt, OutputOpt
from mqadmin.render import OutputFormat, render

app = typer.Typer()

CLUSTER_PANEL = "Cluster"
TOPIC_PANEL = "Topic"


@app.command("clusterList", rich_help_panel=CLUSTER_PANEL)
def cluster_list(
    namesrv: NamesrvOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List the brokers of every cluster (cluster, broker name, broker id, address).

    Apache's version, traffic and disk columns need a broker call and are not shown yet.
    """
    with guarded(debug):
        rows = with_admin(namesrv, ops.cluster_list)
        render(rows, output, columns=ops.CLUSTER_COLUMNS)


@app.command("topicList", rich_help_panel=TOPIC_PANEL)
def topic_list(
    cluster_model: Annotated[bool, typer.Option(
        "-c", "--clusterModel",
        help="Add the cluster of each topic (retry and DLQ topics left out, as Apache does).",
    )] = False,
    namesrv: NamesrvOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List every topic the name server knows."""
    with guarded(debug):
        rows = with_admin(namesrv, lambda admin: ops.topic_list(admin,
                                                                with_cluster=cluster_model))
        columns = ops.TOPIC_CLUSTER_COLUMNS if cluster_model else ops.TOPIC_COLUMNS
        render(rows, output, columns=columns)


@app.command("topicRoute", rich_help_panel=TOPIC_PANEL)
def topic_route(
    topic: Annotated[str, typer.Option("-t", "--topic", help="Topic name.")],
    namesrv: NamesrvOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the route of a topic: its brokers, their addresses and queues."""
    with guarded(debug):
        rows = with_admin(namesrv, lambda admin: ops.topic_route(admin, topic.strip()))
        render(rows, output, columns=ops.ROUTE_COLUMNS)
