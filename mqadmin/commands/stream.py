"""Reading and writing messages in bulk: printMsg, printMsgByQueue, consumeMessage,
sendMessage, checkMsgSendRT."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import Terminal, endpoint, guarded, params, run, run_change
from mqadmin.operations.messages import query as ops
from mqadmin.operations.messages import scan, send
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

PANEL = "Messages"

CharsetOpt = Annotated[str | None, typer.Option(
    "-c", "--charsetName", help="Charset of the bodies (default UTF-8).")]
SubOpt = Annotated[str, typer.Option("-s", "--subExpression",
                                     help="Tag expression, e.g. TagA || TagB.")]
BeginOpt = Annotated[str | None, typer.Option(
    "-b", "--beginTimestamp", help="From this store time (ms, yyyy-MM-dd#HH:mm:ss:SSS, ISO).")]
EndOpt = Annotated[str | None, typer.Option("-e", "--endTimestamp",
                                            help="Up to this store time.")]


LimitOpt = Annotated[int, typer.Option(
    "--limit", min=1, help="At most this many messages a page (the next page's --after goes "
                           "to stderr).")]


def _time(value: str | None) -> int | None:
    return parse_timestamp(value) if value else None


def _show(page: scan.MessagePage, output: OutputFormat, charset: str | None,
          after: str | None) -> None:
    """A page's rows; when the range goes on, how to get the next page (on stderr)."""
    render.render(ops.list_rows(page.messages, charset), output, columns=ops.LIST_COLUMNS)
    if after is not None:
        render.note(f"{len(page.messages)} messages shown and the range goes on: the next "
                    f"page with --after {after} (or narrow -b/-e, or raise --limit).")


@app.command("printMsg", rich_help_panel=PANEL)
def print_msg(
    topic: TopicOpt,
    charset: CharsetOpt = None,
    subscription: SubOpt = "*",
    begin: BeginOpt = None,
    end: EndOpt = None,
    print_body: Annotated[Flag, typer.Option("-d", "--printBody",
                                             help="Show bodies (true|false).")] = Flag.TRUE,
    limit: LimitOpt = scan.PAGE,
    after: Annotated[str | None, typer.Option(
        "--after", help="Start past this message: BROKER:QUEUE:OFFSET, as the previous page "
                        "printed it.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Print the messages of every queue of a topic stored between two times (-b, -e), a
    page of --limit at a time in queue order; nothing is committed."""
    with guarded(debug):
        cs = ops.check_charset(charset)
        b, e = _time(begin), _time(end)
        cursor = scan.QueueCursor.parse(after) if after else None
        with render.progress("printMsg") as update:
            page = run(namesrv, context, lambda admin: scan.print_msg(
                admin, topic.strip(), subscription=subscription, begin=b, end=e, limit=limit,
                after=cursor, on_progress=update))
        _show(page, output, cs if print_body else None,
              page.next.text() if page.next else None)


@app.command("printMsgByQueue", rich_help_panel=PANEL)
def print_msg_by_queue(
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("-a", "--brokerName", help="Broker name.")],
    queue_id: Annotated[int, typer.Option("-i", "--queueId", help="Queue id.")],
    charset: CharsetOpt = None,
    subscription: SubOpt = "*",
    begin: BeginOpt = None,
    end: EndOpt = None,
    print_msgs: Annotated[Flag, typer.Option(
        "-p", "--printMsg", help="Accepted for Apache runbooks: messages are always listed "
                                 "unless -f true.")] = Flag.TRUE,
    print_body: Annotated[Flag, typer.Option("-d", "--printBody",
                                             help="Show bodies (true|false).")] = Flag.FALSE,
    count_tags: Annotated[Flag, typer.Option(
        "-f", "--calculate", help="Count the messages by tag instead, over the whole range "
                                  "(true|false).")] = Flag.FALSE,
    limit: LimitOpt = scan.PAGE,
    after: Annotated[int | None, typer.Option(
        "--after", help="Start past this queue offset, as the previous page printed it.")
    ] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Print the messages of one queue stored between two times (a page of --limit at a
    time), or count them by tag (-f true, most first)."""
    with guarded(debug):
        cs = ops.check_charset(charset)
        b, e = _time(begin), _time(end)
        name = broker_name.strip()
        if count_tags:
            counts = run(namesrv, context, lambda admin: scan.count_tags(
                admin, topic.strip(), name, queue_id, subscription=subscription, begin=b,
                end=e))
            render.render(ops.tag_count_rows(counts), output, columns=ops.TAG_COUNT_COLUMNS)
            return
        page = run(namesrv, context, lambda admin: scan.print_msg_by_queue(
            admin, topic.strip(), name, queue_id, subscription=subscription, begin=b, end=e,
            limit=limit, after=after))
        _show(page, output, cs if print_body else None,
              str(page.next.offset) if page.next else None)


@app.command("consumeMessage", rich_help_panel=PANEL)
def consume_message(
    topic: TopicOpt,
    broker_name: Annotated[str | None, typer.Option("-b", "--brokerName",
                                                    help="Only this broker.")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--queueId",
                                                 help="Only this queue (needs -b).")] = None,
    offset: Annotated[int | None, typer.Option("-o", "--offset",
                                               help="From this offset (needs -i).")] = None,
    group: Annotated[str | None, typer.Option(
        "-g", "--consumerGroup", help="Accepted for Apache runbooks (nothing is committed).")
    ] = None,
    begin: Annotated[str | None, typer.Option("-s", "--beginTimestamp",
                                              help="From this store time.")] = None,
    end: EndOpt = None,
    count: Annotated[int, typer.Option("-c", "--MessageNumber", min=1,
                                       help="At most this many messages.")] = 128,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputLongOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Read up to -c messages of a topic, a queue, or a queue from an offset, with their
    bodies; nothing is committed."""
    with guarded(debug):
        b, e = _time(begin), _time(end)
        found = run(namesrv, context, lambda admin: scan.consume_message(
            admin, topic.strip(), broker_name=broker_name.strip() if broker_name else None,
            queue_id=queue_id, offset=offset, begin=b, end=e, count=count))
        render.render(ops.list_rows(found, "UTF-8"), output, columns=ops.LIST_COLUMNS)


@app.command("sendMessage", rich_help_panel=PANEL)
def send_message(
    ctx: typer.Context,
    topic: TopicOpt,
    body: Annotated[str, typer.Option("-p", "--body", help="The body, as UTF-8 text.")],
    key: Annotated[str | None, typer.Option("-k", "--key", help="Message keys.")] = None,
    tags: Annotated[str | None, typer.Option("-c", "--tags", help="Message tag.")] = None,
    broker_name: Annotated[str | None, typer.Option("-b", "--broker",
                                                    help="Send to this broker.")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--qid",
                                                 help="Send to this queue (needs -b).")] = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Send one message: the plan (topic, broker or queue, size) is shown and confirmed (or
    --yes), then the message is sent, read back where it was stored and recorded in the
    audit log."""
    with guarded(debug):
        out = send.Outgoing(topic.strip(), body.encode("utf-8"), keys=key, tags=tags,
                            broker_name=broker_name.strip() if broker_name else None,
                            queue_id=queue_id)
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run),
                   send.SendChange(out, params(ctx)))


@app.command("checkMsgSendRT", rich_help_panel=PANEL)
def check_msg_send_rt(
    topic: TopicOpt,
    amount: Annotated[int, typer.Option("-a", "--amount", min=1,
                                        help="Messages to send.")] = 100,
    size: Annotated[int, typer.Option("-s", "--size", min=1, help="Body size in bytes.")] = 128,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Send test messages to a topic and time each send (the average goes to stderr)."""
    with guarded(debug):
        with render.progress("checkMsgSendRT") as update:
            rows, avg = run(namesrv, context, lambda admin: send.check_send_rt(
                admin, topic.strip(), amount=amount, size=size, on_progress=update))
        render.render(rows, output, columns=send.RT_COLUMNS)
        render.note(f"Avg RT: {avg:.3f} ms")
