"""Consumer and producer commands that read: consumerProgress, consumerConnection,
consumerStatus, producerConnection, allocateMQ."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import guarded, run
from mqadmin.operations import consumer as ops
from mqadmin.options import ContextOpt, DebugOpt, NamesrvOpt, OutputOpt, TopicOpt
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Groups and consumers"

ConsumerGroupOpt = Annotated[str, typer.Option("-g", "--consumerGroup",
                                               help="Consumer group name.")]


@app.command("consumerProgress", rich_help_panel=PANEL)
def consumer_progress(
    group: Annotated[str | None, typer.Option(
        "-g", "--groupName", help="One group, queue by queue (default: every group).")] = None,
    topic: Annotated[str | None, typer.Option("-t", "--topicName",
                                              help="With -g: only this topic.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show how far consumers are behind.

    With -g, one row per queue: broker and consumer offset, the client holding it, the lag
    in messages (diff = brokerOffset - consumerOffset) and in time (lagMs: since the oldest
    unconsumed message was stored), then a "(total)" row.  Without -g, every group with its
    clients, version, type, model, TPS and total diff.
    """
    with guarded(debug):
        if group:
            progress = run(namesrv, context, lambda admin: ops.read_progress(
                admin, group.strip(), topic.strip() if topic else None))
            render.render(ops.progress_rows(progress), output, columns=ops.PROGRESS_COLUMNS)
            render.note(f"Consume TPS: {progress.consume_tps:.2f}")
            return
        with render.progress("consumerProgress") as update:
            rows = run(namesrv, context, lambda admin: ops.group_list(admin, update))
        render.render(rows, output, columns=ops.GROUPS_COLUMNS)


@app.command("consumerConnection", rich_help_panel=PANEL)
def consumer_connection(
    group: ConsumerGroupOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List the connected clients of a consumer group with its subscriptions and settings
    (exit code 3 when none is online)."""
    with guarded(debug):
        cc = run(namesrv, context, lambda admin: ops.consumer_connection(admin, group.strip()))
        render.render(ops.connection_rows(cc), output, columns=ops.CONNECTION_COLUMNS)


@app.command("consumerStatus", rich_help_panel=PANEL)
def consumer_status(
    group: ConsumerGroupOpt,
    client_id: Annotated[str | None, typer.Option(
        "-i", "--clientId", help="One client: its queues as it reports them.")] = None,
    jstack: Annotated[bool, typer.Option(
        "-s", "--jstack", help="With -i: also print the client's thread stacks (stderr).")
    ] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Ask the online clients of a group how they consume (through a broker): their
    subscriptions, queues and TPS; with -i, one client's queues in detail."""
    with guarded(debug):
        if client_id:
            rows, info = run(namesrv, context, lambda admin: ops.client_status(
                admin, group.strip(), client_id.strip(), jstack=jstack))
            render.render(rows, output, columns=ops.CLIENT_QUEUE_COLUMNS)
            for key, value in sorted(info.properties.items()):
                render.note(f"{key}: {value}")
            if jstack and info.jstack:
                render.note(info.jstack)
            return
        clients = run(namesrv, context, lambda admin: ops.read_clients(admin, group.strip()))
        rows, same = ops.status_rows(clients)
        render.render(rows, output, columns=ops.STATUS_COLUMNS)
        if not same:
            render.warn("the clients of the group subscribe differently; messages of the "
                        "topics not all of them subscribe will be lost or consumed late.")


@app.command("producerConnection", rich_help_panel=PANEL)
def producer_connection(
    group: Annotated[str, typer.Option("-g", "--producerGroup", help="Producer group.")],
    topic: TopicOpt,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List the connected clients of a producer group (asked of a broker of the topic)."""
    with guarded(debug):
        rows = run(namesrv, context, lambda admin: ops.producer_connection(
            admin, group.strip(), topic.strip()))
        render.render(rows, output, columns=ops.PRODUCER_COLUMNS)


@app.command("allocateMQ", rich_help_panel=PANEL)
def allocate_mq(
    topic: TopicOpt,
    ip_list: Annotated[str, typer.Option("-i", "--ipList",
                                         help="Client ids, comma-separated.")],
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show which queues of a topic each client would get from the default (averagely)
    allocation."""
    with guarded(debug):
        ids = [i.strip() for i in ip_list.split(",") if i.strip()]
        rows = run(namesrv, context, lambda admin: ops.allocate_mq(admin, topic.strip(), ids))
        render.render(rows, output, columns=ops.ALLOCATE_COLUMNS)
