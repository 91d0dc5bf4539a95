"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicConfig,
topicStatus, topicClusterList, updateTopicPerm, updateOrderConf."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import endpoint, guarded, mutate, params, run, with_admin
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations import namesrv as ns_ops
from mqadmin.operations import topic as ops
from mqadmin.operations import topic_attributes as attr_ops
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
    TopicOpt,
    YesOpt,
    one_target,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Topics"

PermOpt = Annotated[int, typer.Option("-p", "--perm", help="2 write only, 4 read only, 6 both.")]


@app.command("updateTopic", rich_help_panel=PANEL)
def update_topic(
    ctx: typer.Context,
    topic: TopicOpt,
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    read_queues: Annotated[int, typer.Option("-r", "--readQueueNums",
                                             help="Read queues per broker.")] = 8,
    write_queues: Annotated[int, typer.Option("-w", "--writeQueueNums",
                                              help="Write queues per broker.")] = 8,
    perm: PermOpt = 6,
    order: Annotated[Flag, typer.Option(
        "-o", "--order", help="Ordered topic: also writes its order conf (true|false).")
    ] = Flag.FALSE,
    unit: Annotated[Flag, typer.Option("-u", "--unit", help="Unit topic (true|false).")
                    ] = Flag.FALSE,
    has_unit_sub: Annotated[Flag, typer.Option("-s", "--hasUnitSub",
                                               help="Has unit subscriptions (true|false).")
                            ] = Flag.FALSE,
    attributes: Annotated[str | None, typer.Option(
        "-a", "--attributes", help=f"RocketMQ 5 topic attributes: {attr_ops.ATTRIBUTE_HELP}.")
    ] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Create or update a topic on a broker (-b) or on every master of a cluster (-c).

    Without -a a broker keeps the topic's attributes; with it (RocketMQ 5 brokers only) the
    broker applies Apache 5.3's rules: message.type may change, queue.type and
    cleanup.policy only be given when the topic is created.
    """
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        config = ops.new_topic_config(topic, read=read_queues, write=write_queues, perm=perm,
                                      order=bool(order), unit=bool(unit),
                                      has_unit_sub=bool(has_unit_sub))
        changes = attr_ops.parse_attributes(attributes)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_topic(admin, config, broker_addr=b, cluster=c,
                                              attributes=changes),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteTopic", rich_help_panel=PANEL)
def delete_topic(
    ctx: typer.Context,
    topic: TopicOpt,
    cluster: Annotated[str, typer.Option("-c", "--clusterName",
                                         help="Delete from this cluster's masters.")],
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Delete a topic from every master of a cluster, then from every name server."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_topic(admin, topic.strip(), cluster.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("topicList", rich_help_panel=PANEL)
def topic_list(
    cluster_model: Annotated[bool, typer.Option(
        "-c", "--clusterModel",
        help="One row per cluster and consuming group (retry and DLQ topics left out).",
    )] = False,
    with_attributes: Annotated[bool, typer.Option(
        "--attributes", help="Add each topic's messageType and attributes (RocketMQ 5), read "
                             "from the master brokers.")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List every topic the name server knows."""
    with guarded(debug), render.progress("topicList") as update:
        rows = run(namesrv, context, lambda admin: ops.topic_list(
            admin, with_cluster=cluster_model, with_attributes=with_attributes,
            on_progress=update))
    columns = ops.TOPIC_CLUSTER_COLUMNS if cluster_model else ops.TOPIC_COLUMNS
    if with_attributes:
        columns = (*columns, *attr_ops.ATTRIBUTE_COLUMNS)
    render.render(rows, output, columns=columns)


@app.command("topicRoute", rich_help_panel=PANEL)
def topic_route(
    topic: TopicOpt,
    as_list: Annotated[bool, typer.Option("-l", "--list",
                                          help="Accepted for Apache 5.x runbooks; rows are "
                                               "always a list.")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the route of a topic: its brokers, their addresses and queues."""
    with guarded(debug):
        rows = run(namesrv, context, lambda admin: ops.topic_route(admin, topic.strip()))
        render.render(rows, output, columns=ops.ROUTE_COLUMNS)


@app.command("topicConfig", rich_help_panel=PANEL)
def topic_config(
    topic: TopicOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show each broker's config of a topic with its RocketMQ 5 attributes (messageType);
    a 4.x broker's row has none."""
    with guarded(debug):
        gathered = run(namesrv, context, lambda admin: attr_ops.topic_config(
            admin, topic.strip()))
        render.render(gathered.rows, output, columns=attr_ops.CONFIG_COLUMNS)
        settle("topicConfig", gathered)


@app.command("topicStatus", rich_help_panel=PANEL)
def topic_status(
    topic: TopicOpt,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster",
                                                help="Only this cluster's brokers.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the min and max offset and the last store time of every queue of a topic."""
    with guarded(debug):
        gathered = run(namesrv, context, lambda admin: ops.topic_status(
            admin, topic.strip(), cluster.strip() if cluster else None))
        render.render(gathered.rows, output, columns=ops.STATUS_COLUMNS)
        settle("topicStatus", gathered)


@app.command("topicClusterList", rich_help_panel=PANEL)
def topic_cluster_list(
    topic: TopicOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List the clusters a topic is on."""
    with guarded(debug):
        rows = run(namesrv, context, lambda admin: ops.topic_cluster_list(admin, topic.strip()))
        render.render(rows, output, columns=ops.CLUSTER_OF_COLUMNS)


@app.command("updateTopicPerm", rich_help_panel=PANEL)
def update_topic_perm(
    ctx: typer.Context,
    topic: TopicOpt,
    perm: PermOpt,
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Change a topic's permission on a broker (-b) or on a cluster's brokers (-c), keeping
    its queue numbers."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_topic_perm(admin, topic.strip(), perm,
                                                   broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


class OrderMethod(StrEnum):
    GET = "get"
    PUT = "put"
    DELETE = "delete"


@app.command("updateOrderConf", rich_help_panel=PANEL)
def update_order_conf(
    ctx: typer.Context,
    topic: TopicOpt,
    method: Annotated[OrderMethod, typer.Option("-m", "--method",
                                                help="get, put or delete.")],
    order_conf: Annotated[str | None, typer.Option(
        "-v", "--orderConf", help="For put: brokerName1:num;brokerName2:num.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Get, put or delete the order conf of a topic (the KV item ORDER_TOPIC_CONFIG/topic on
    every name server)."""
    with guarded(debug):
        name = topic.strip()
        where = endpoint(namesrv, context)
        if method is OrderMethod.GET:
            gathered = with_admin(where, lambda admin: ops.order_conf(admin, name))
            render.render(gathered.rows, output, columns=ops.ORDER_CONF_COLUMNS)
            settle("updateOrderConf", gathered)
            return
        if method is OrderMethod.PUT:
            conf = (order_conf or "").strip()
            if not conf:
                raise UsageProblem("put needs the order conf: -v brokerName1:num;brokerName2:num")
            mutate(where, lambda admin: ns_ops.update_kv_config(
                admin.namesrv, ops.ORDER_NAMESPACE, name, conf, action="updateOrderConf"),
                yes=yes, dry_run=dry_run, output=output, args=params(ctx))
            return
        mutate(where, lambda admin: ns_ops.delete_kv_config(
            admin.namesrv, ops.ORDER_NAMESPACE, name, action="updateOrderConf"),
            yes=yes, dry_run=dry_run, output=output, args=params(ctx))
