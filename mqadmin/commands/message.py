"""Finding messages and delivering one again: queryMsgById, queryMsgByKey, queryMsgByUniqueKey,
queryMsgByOffset, queryCq, consumeMessageDirectly, resendMessage."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import Terminal, endpoint, guarded, params, run_change, with_admin
from mqadmin.operations.messages import query as ops
from mqadmin.operations.messages import redeliver, scan
from mqadmin.options import (
    ContextOpt,
    DebugOpt,
    DryRunOpt,
    Flag,
    NamesrvOpt,
    OutputLongOpt,
    OutputOpt,
    TopicOpt,
    YesOpt,
    parse_timestamp,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

#: Where a message id (UNIQ_KEY) is looked up (an offset message id names its broker).
IdTopicOpt = Annotated[str | None, typer.Option(
    "-t", "--topic", help="Look a message id (UNIQ_KEY) up in this topic only.")]
PANEL = "Messages"

ConsumerGroupOpt = Annotated[str | None, typer.Option(
    "-g", "--consumerGroup", help="With -d: the group of the client to consume it again.")]
ClientIdOpt = Annotated[str | None, typer.Option(
    "-d", "--clientId", help="With -g: the client that consumes it again.")]
CharsetOpt = Annotated[str | None, typer.Option(
    "-f", "--bodyFormat", help="Charset to decode the body with (default UTF-8).")]


def _consume_again(ctx: typer.Context, group: str, client_id: str, msg_ids: list[str],
                   topic: str | None, namesrv: str | None, context: str | None,
                   output: OutputFormat) -> None:
    """Apache's queryMsgById/queryMsgByUniqueKey -g -d: consumeMessageDirectly without a
    question (as Apache's runbooks run it), audited."""
    change = redeliver.ConsumeDirectlyChange(group, client_id, msg_ids, topic, params(ctx),
                                             ctx.info_name or "consumeMessageDirectly")
    run_change(Terminal(endpoint(namesrv, context), True, output, False), change)


@app.command("queryMsgById", rich_help_panel=PANEL)
def query_msg_by_id(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Option(
        "-i", "--msgId", help="Message id(s), comma-separated: message ids (UNIQ_KEY) or "
                              "offset message ids.")],
    group: ConsumerGroupOpt = None,
    client_id: ClientIdOpt = None,
    resend: Annotated[Flag, typer.Option(
        "-s", "--sendMessage", help="Send the message(s) again to their topic (true|false): "
                                    "planned, confirmed (or --yes), read back, audited.")
    ] = Flag.FALSE,
    unit_name: Annotated[str | None, typer.Option("-u", "--unitName",
                                                  help="Accepted for Apache runbooks.")] = None,
    charset: CharsetOpt = None,
    topic: Annotated[str | None, typer.Option(
        "-t", "--topic", help="Look a message id (UNIQ_KEY) up in this topic only (default: "
                              "every topic).")] = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show a message by its id, every field, the body, and whether each consuming group
    consumed it.  The id is an offset message id when it names a broker of this cluster and
    a message at that commit-log offset, else a message id (UNIQ_KEY) looked up in the
    brokers' index (exit 3, saying why each failed, when it is neither).  With -g and -d a
    client consumes it again; with -s true it is sent again to its topic (a change: asked,
    or --yes)."""
    with guarded(debug):
        ids = [i.strip() for i in msg_id.split(",") if i.strip()]
        name = topic.strip() if topic else None
        if group and client_id:
            _consume_again(ctx, group.strip(), client_id.strip(), ids, name, namesrv, context,
                           output)
            return
        where = endpoint(namesrv, context)
        if resend:
            run_change(Terminal(where, yes, output, dry_run),
                       redeliver.SendAgainChange(ids, name, params(ctx)))
            return
        cs = ops.check_charset(charset)
        details = with_admin(where, lambda admin: ops.query_by_id(admin, ids, topic=name))
        render.render(ops.detail_rows(details, cs), output, columns=ops.DETAIL_COLUMNS,
                      vertical=True)


@app.command("queryMsgByKey", rich_help_panel=PANEL)
def query_msg_by_key(
    topic: TopicOpt,
    key: Annotated[str, typer.Option("-k", "--msgKey", help="Message key.")],
    begin: Annotated[str | None, typer.Option("-b", "--beginTimestamp",
                                              help="Stored at or after (ms or date).")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp",
                                            help="Stored before (ms or date).")] = None,
    max_num: Annotated[int, typer.Option("-c", "--maxNum", min=1,
                                         help="At most this many messages.")] = 64,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Find the messages of a topic by key (the brokers' key index)."""
    with guarded(debug):
        b = parse_timestamp(begin) if begin else 0
        e = parse_timestamp(end) if end else 2**63 - 1
        found = with_admin(endpoint(namesrv, context), lambda admin: ops.query_by_key(
            admin, topic.strip(), key.strip(), begin=b, end=e, max_num=max_num))
        render.render(ops.list_rows(found, "UTF-8"), output, columns=ops.KEY_COLUMNS)


@app.command("queryMsgByUniqueKey", rich_help_panel=PANEL)
def query_msg_by_unique_key(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Option("-i", "--msgId", help="Unique key (UNIQ_KEY).")],
    topic: TopicOpt,
    group: ConsumerGroupOpt = None,
    client_id: ClientIdOpt = None,
    show_all: Annotated[bool, typer.Option(
        "-a", "--showAll", help="Every copy (a retried send may store one twice).")] = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show a message by the unique id its producer gave it (UNIQ_KEY; an offset message id
    works too); with -g and -d a client consumes it again."""
    with guarded(debug):
        if group and client_id:
            _consume_again(ctx, group.strip(), client_id.strip(), [msg_id.strip()],
                           topic.strip(), namesrv, context, output)
            return
        details = with_admin(endpoint(namesrv, context), lambda admin: ops.query_by_id(
            admin, [msg_id.strip()], topic=topic.strip(), show_all=show_all))
        render.render(ops.detail_rows(details), output, columns=ops.DETAIL_COLUMNS,
                      vertical=True)


@app.command("queryMsgByOffset", rich_help_panel=PANEL)
def query_msg_by_offset(
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="Broker name.")],
    queue_id: Annotated[int, typer.Option("-i", "--queueId", help="Queue id.")],
    offset: Annotated[int, typer.Option("-o", "--offset", help="Queue offset.")],
    charset: CharsetOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the message at an offset of a queue."""
    with guarded(debug):
        cs = ops.check_charset(charset)
        found = with_admin(endpoint(namesrv, context), lambda admin: ops.query_by_offset(
            admin, topic.strip(), broker_name.strip(), queue_id, offset))
        render.render(ops.detail_rows([found], cs), output, columns=ops.DETAIL_COLUMNS,
                      vertical=True)


@app.command("consumeMessageDirectly", rich_help_panel=PANEL)
def consume_message_directly(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="Consumer group.")],
    client_id: Annotated[str, typer.Option(
        "-d", "--clientId", help="The online client to hand it to (`mqadmin "
                                 "consumerConnection -g GROUP` lists them).")],
    msg_id: Annotated[str, typer.Option(
        "-i", "--msgId", help="Message id(s), comma-separated: message ids (UNIQ_KEY) or "
                              "offset message ids.")],
    topic: IdTopicOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Hand a stored message to one online consumer of a group, whose listener consumes it
    again (nothing is committed, no other consumer sees it); shows the consumer's answer
    (exit 4 unless CR_SUCCESS)."""
    with guarded(debug):
        ids = [i.strip() for i in msg_id.split(",") if i.strip()]
        change = redeliver.ConsumeDirectlyChange(group.strip(), client_id.strip(), ids,
                                                 topic.strip() if topic else None,
                                                 params(ctx))
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run), change)


@app.command("resendMessage", rich_help_panel=PANEL)
def resend_message(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Option(
        "-i", "--msgId", help="Message id (UNIQ_KEY) or offset message id.")],
    group: Annotated[str, typer.Option("-g", "--consumerGroup",
                                       help="The group to deliver it to again.")],
    topic: IdTopicOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Resend a stored message to a group's retry topic (%RETRY%GROUP): only that group
    consumes it again, at once, seeing the original topic; the copy is read back and the
    resend audited."""
    with guarded(debug):
        change = redeliver.ResendToGroupChange(group.strip(), msg_id.strip(),
                                               topic.strip() if topic else None, params(ctx))
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run), change)


@app.command("queryCq", rich_help_panel=PANEL)
def query_cq(
    topic: TopicOpt,
    queue_id: Annotated[int, typer.Option("-q", "--queue", help="Queue id.")],
    index: Annotated[int, typer.Option("-i", "--index", help="First entry.")],
    count: Annotated[int, typer.Option("-c", "--count", min=1, help="Entries.")] = 10,
    broker_addr: Annotated[str | None, typer.Option(
        "-b", "--broker", help="Broker address (default: the route's first master).")] = None,
    group: Annotated[str | None, typer.Option(
        "-g", "--consumer", help="Also show this group's subscription.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show consume-queue entries of a queue: commit-log offset, size and tag hash of each
    (the queue's bounds go to stderr)."""
    with guarded(debug):
        rows, info = with_admin(endpoint(namesrv, context), lambda admin: scan.query_cq(
            admin, topic.strip(), queue_id, index, count,
            broker_addr=broker_addr.strip() if broker_addr else None,
            group=group.strip() if group else None))
        render.render(rows, output, columns=scan.CQ_COLUMNS)
        render.note(f"broker {info['broker']}: min index {info['minQueueIndex']}, "
                    f"max index {info['maxQueueIndex']}")
        if info["subscription"] is not None:
            render.note(f"subscription of {group}: {info['subscription']}")
