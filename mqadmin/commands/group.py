"""Consumer-group commands that change things: updateSubGroup, deleteSubGroup,
resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.client.admin.broker import RESET_TO_MAX
from engine.protocol.body.subscription import SubscriptionGroupConfig
from mqadmin.commands import endpoint, guarded, mutate, params
from mqadmin.operations import group as ops
from mqadmin.operations.topic_attributes import parse_attributes
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
    parse_timestamp,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Groups and consumers"

GroupOpt = Annotated[str, typer.Option("-g", "--groupName", help="Consumer group name.")]
ForceOpt = Annotated[Flag, typer.Option(
    "-f", "--force", help="Move forward as well as back (true|false).")]


def _flag(value: Flag | None, default: bool) -> bool:
    return default if value is None else bool(value)


def _orderly_flag(value: str | None) -> str | None:
    """`-o true|false`; an output format there gets told where -o went."""
    if value is None:
        return None
    word = value.strip().lower()
    if word in (Flag.TRUE, Flag.FALSE):
        return word
    if word in tuple(OutputFormat):
        raise typer.BadParameter(
            "-o is consumeMessageOrderly (true|false) here, as in Apache 5.3's mqadmin; for "
            f"the output format use --output {word}")
    raise typer.BadParameter(f"{value!r} is neither true nor false")


@app.command("updateSubGroup", rich_help_panel=PANEL)
def update_sub_group(
    ctx: typer.Context,
    group: GroupOpt,
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    consume_enable: Annotated[Flag | None, typer.Option(
        "-s", "--consumeEnable", help="Consumption allowed (true|false; default true).")
    ] = None,
    from_min: Annotated[Flag | None, typer.Option(
        "-m", "--consumeFromMinEnable", help="Start from the min offset (default false).")
    ] = None,
    broadcast: Annotated[Flag | None, typer.Option(
        "-d", "--consumeBroadcastEnable", help="Broadcasting allowed (default false).")
    ] = None,
    retry_queues: Annotated[int | None, typer.Option(
        "-q", "--retryQueueNums", min=1, help="Retry queues (default 1).")] = None,
    retry_max: Annotated[int | None, typer.Option(
        "-r", "--retryMaxTimes", min=0, help="Retries before the DLQ (default 16).")] = None,
    broker_id: Annotated[int | None, typer.Option(
        "-i", "--brokerId", help="Consume from this broker id (default 0).")] = None,
    slow_broker_id: Annotated[int | None, typer.Option(
        "-w", "--whichBrokerWhenConsumeSlowly", help="Broker id when slow (default 1).")
    ] = None,
    notify: Annotated[Flag | None, typer.Option(
        "-a", "--notifyConsumerIdsChanged", help="Notify clients of rebalances (default true).")
    ] = None,
    orderly: Annotated[str | None, typer.Option(
        "-o", "--consumeMessageOrderly", callback=_orderly_flag, metavar="true|false",
        help="RocketMQ 5: pop FIFO topics in order (default false).")] = None,
    attributes: Annotated[str | None, typer.Option(
        "--attributes", help="RocketMQ 5 group attributes (+a=b,+c=d,-e); 5.3 defines none.")
    ] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Create or replace a consumer group on a broker (-b) or every master of a cluster (-c).

    As in Apache, settings not given take their defaults (the group is replaced, not
    merged).  -o is consumeMessageOrderly, as in Apache 5.3's mqadmin (--output for the
    format).
    """
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        base = SubscriptionGroupConfig(group.strip())
        config = SubscriptionGroupConfig(
            group.strip(), consume_enable=_flag(consume_enable, True),
            consume_from_min_enable=_flag(from_min, False),
            consume_broadcast_enable=_flag(broadcast, False),
            retry_queue_nums=base.retry_queue_nums if retry_queues is None else retry_queues,
            retry_max_times=base.retry_max_times if retry_max is None else retry_max,
            broker_id=base.broker_id if broker_id is None else broker_id,
            which_broker_when_consume_slowly=(base.which_broker_when_consume_slowly
                                              if slow_broker_id is None else slow_broker_id),
            notify_consumer_ids_changed_enable=_flag(notify, True),
            consume_message_orderly=orderly == Flag.TRUE,
            attributes=parse_attributes(attributes))
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_sub_group(admin, config, broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteSubGroup", rich_help_panel=PANEL)
def delete_sub_group(
    ctx: typer.Context,
    group: GroupOpt,
    broker_addr: BrokerAddrOpt = None,
    cluster: ClusterOpt = None,
    remove_offset: Annotated[Flag, typer.Option(
        "-r", "--removeOffset", help="Also delete its consumer offsets (true|false).")
    ] = Flag.FALSE,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Delete a consumer group from a broker (-b) or every master of a cluster (-c); with -c
    its retry and dead-letter topics go too, as in Apache."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_sub_group(admin, group.strip(), broker_addr=b,
                                                  cluster=c, remove_offset=bool(remove_offset)),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("resetOffsetByTime", rich_help_panel=PANEL)
def reset_offset_by_time(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("-g", "--group", help="Consumer group.")],
    topic: TopicOpt,
    timestamp: Annotated[str, typer.Option(
        "-s", "--timestamp",
        help="now, ms since the epoch, yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601.")],
    force: ForceOpt = Flag.TRUE,
    cplus: Annotated[bool, typer.Option("-c", "--cplus",
                                        help="The consumers are C++ clients.")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Move a group's offsets of a topic to the first message stored at or after a time,
    without restarting its consumers (``-s now``: to the end)."""
    with guarded(debug):
        ms = RESET_TO_MAX if timestamp.strip() == "now" else parse_timestamp(timestamp)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.reset_offset(admin, group.strip(), topic.strip(), ms,
                                              force=bool(force), cpp_clients=cplus),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("skipAccumulatedMessage", rich_help_panel=PANEL)
def skip_accumulated_message(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("-g", "--group", help="Consumer group.")],
    topic: TopicOpt,
    force: ForceOpt = Flag.TRUE,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Skip every message a group has not consumed yet: move its offsets to the end."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.reset_offset(admin, group.strip(), topic.strip(),
                                              RESET_TO_MAX, force=bool(force),
                                              action="skipAccumulatedMessage"),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("cloneGroupOffset", rich_help_panel=PANEL)
def clone_group_offset(
    ctx: typer.Context,
    src: Annotated[str, typer.Option("-s", "--srcGroup", help="Group to copy from.")],
    dest: Annotated[str, typer.Option("-d", "--destGroup", help="Group to copy to.")],
    topic: TopicOpt,
    offline: Annotated[Flag, typer.Option(
        "-o", "--offline", help="The source group is offline (true|false).")] = Flag.FALSE,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Copy one group's committed offsets of a topic to another group."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.clone_group_offset(admin, src.strip(), dest.strip(),
                                                    topic.strip(), offline=bool(offline)),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))
