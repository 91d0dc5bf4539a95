"""Dead letters: dlq list, show, export, import, discard, status (resend: dlq_resend.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import endpoint, guarded, with_admin
from mqadmin.config import Endpoint
from mqadmin.operations import dlq_list, dlq_show
from mqadmin.operations.dlq_ledger import Ledger
from mqadmin.operations.dlq_model import Filters
from mqadmin.options import ContextOpt, DebugOpt, NamesrvOpt, OutputOpt, parse_timestamp
from mqadmin.render import OutputFormat

app = typer.Typer(
    help="Dead letters: find them, triage them, resend them (recorded in a ledger, "
         "resumable).  See docs/dead-letters.md.",
    no_args_is_help=True)

GroupOpt = Annotated[str, typer.Option("-g", "--group", help="Consumer group.")]
TopicFilter = Annotated[str | None, typer.Option(
    "--topic", help="Only dead letters from this original topic.")]
KeyFilter = Annotated[str | None, typer.Option("--key", help="Only dead letters with this key.")]
TagFilter = Annotated[str | None, typer.Option("--tag", help="Only dead letters with this tag.")]
SinceFilter = Annotated[str | None, typer.Option(
    "--since", help="Stored in the DLQ at or after (ms, yyyy-MM-dd#HH:mm:ss:SSS, ISO).")]
UntilFilter = Annotated[str | None, typer.Option("--until", help="Stored before this time.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1,
                                              help="At most this many dead letters.")]


def scope(where: Endpoint) -> str:
    """The ledger's name for a cluster: its name servers, sorted."""
    return ";".join(sorted(where.addrs))


def ledger_of(where: Endpoint) -> Ledger:
    return Ledger(scope(where))


def filters(topic: str | None, key: str | None, tag: str | None, since: str | None,
            until: str | None, limit: int | None = None,
            ids: frozenset[str] | None = None) -> Filters:
    return Filters(topic=topic.strip() if topic else None, key=key.strip() if key else None,
                   tag=tag.strip() if tag else None,
                   since=parse_timestamp(since) if since else None,
                   until=parse_timestamp(until) if until else None, ids=ids, limit=limit)


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
