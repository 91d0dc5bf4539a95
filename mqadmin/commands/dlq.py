"""Dead letters: dlq list, show, export, import, status (resend and discard: dlq_resend.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import Terminal, endpoint, guarded, params, run_change, with_admin
from mqadmin.commands import dlq_resend as dlq_resend_commands
from mqadmin.commands.dlq_options import (
    GroupOpt,
    KeyFilter,
    LimitOpt,
    SinceFilter,
    TagFilter,
    TopicFilter,
    UntilFilter,
    filters,
)
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.dlq import list as dlq_list
from mqadmin.operations.dlq import show as dlq_show
from mqadmin.operations.dlq import status as dlq_status
from mqadmin.operations.dlq import transfer as dlq_transfer
from mqadmin.operations.dlq.ledger import ledger_of
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

app = typer.Typer(
    help="Dead letters: find them, triage them, resend them (recorded in a ledger, "
         "resumable).  See docs/dead-letters.md.",
    no_args_is_help=True)


@app.command("list")
def list_(
    group: Annotated[str | None, typer.Option("-g", "--group",
                                              help="Only this consumer group.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Every group that has dead letters: total and still unhandled, oldest and newest,
    growth over the last hour and day, and the top original topics."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        with ledger_of(where) as ledger, render.progress("dlq list") as update:
            rows = with_admin(where, lambda admin: dlq_list.list_groups(
                admin, ledger, group=group.strip() if group else None, on_progress=update))
        if group and not rows:
            render.note(f"group '{group}' has no dead-letter topic.")
        render.render(rows, output, columns=dlq_list.LIST_COLUMNS)


@app.command("show")
def show(
    group: GroupOpt,
    topic: TopicFilter = None,
    key: KeyFilter = None,
    tag: TagFilter = None,
    since: SinceFilter = None,
    until: UntilFilter = None,
    limit: LimitOpt = None,
    body: Annotated[bool, typer.Option("--body", help="Whole bodies, not previews.")] = False,
    summary: Annotated[str | None, typer.Option(
        "--summary", metavar="BY",
        help="Group them by topic, tag, key-prefix, hour or field:NAME (a JSON body "
             "field); several comma-separated.")] = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """A group's dead letters: ids, original topic and id, keys, tags, times, triage state
    and body; or with --summary, how many share a pattern and when."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        chosen = filters(topic, key, tag, since, until, limit)
        if summary is not None:
            dlq_show.summary_keys(summary)
            with render.progress("dlq show") as update:
                rows = with_admin(where, lambda admin: dlq_show.summary(
                    admin, group.strip(), summary, chosen, on_progress=update))
            render.render(rows, output, columns=dlq_show.SUMMARY_COLUMNS)
            return
        with ledger_of(where) as ledger, render.progress("dlq show") as update:
            rows = with_admin(where, lambda admin: dlq_show.show(
                admin, group.strip(), chosen, ledger=ledger, full_body=body,
                on_progress=update))
        render.render(rows, output, columns=dlq_show.SHOW_COLUMNS, vertical=body)


@app.command("export")
def export(
    group: GroupOpt,
    file: Annotated[Path, typer.Option("-f", "--file", help="JSON Lines file to write.")],
    topic: TopicFilter = None,
    key: KeyFilter = None,
    tag: TagFilter = None,
    since: SinceFilter = None,
    until: UntilFilter = None,
    limit: LimitOpt = None,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Write a group's dead letters to a JSON Lines file: every field and property, the
    body exactly (base64, and as text when it is UTF-8)."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        chosen = filters(topic, key, tag, since, until, limit)
        partial = file.with_name(file.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out, \
                    render.progress("dlq export") as update:
                count = with_admin(where, lambda admin: dlq_transfer.export(
                    admin, group.strip(), out, chosen, on_progress=update))
            partial.replace(file)
        except OSError as exc:
            raise UsageProblem(f"cannot write {file}: {exc.strerror or exc}.") from None
        finally:
            partial.unlink(missing_ok=True)
        render.render([{"group": group, "file": str(file), "exported": count}], output,
                      columns=("group", "file", "exported"))


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="JSON Lines file of dlq export.")],
    to_topic: Annotated[str, typer.Option("--to-topic", help="Topic to send them to.")],
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Send the messages of a `dlq export` file to a topic (body, keys, tags and user
    properties as exported); every line is checked before anything is sent, the plan is
    confirmed (or --yes), and each message sent is read back where it was stored."""
    with guarded(debug):
        messages = dlq_transfer.read_file(file)
        chg = dlq_transfer.ImportChange(str(file), messages, to_topic.strip(), params(ctx))
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run), chg,
                   details="not sent or not read back:")


@app.command("status")
def status(
    batch: Annotated[str | None, typer.Argument(help="One batch (default: the newest).")] = None,
    group: Annotated[str | None, typer.Option("-g", "--group",
                                              help="Only this group's batches.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Batches to show.")] = 20,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Each resend and discard batch: sent, failed, and of the sent copies how many the
    group consumed since, how many are pending, and how many came back to the DLQ."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        with ledger_of(where) as ledger:
            rows = with_admin(where, lambda admin: dlq_status.status(
                admin, ledger, batch.strip() if batch else None,
                group=group.strip() if group else None, limit=limit))
        render.render(rows, output, columns=dlq_status.STATUS_COLUMNS)


app.command("resend")(dlq_resend_commands.resend)
app.command("discard")(dlq_resend_commands.discard)
