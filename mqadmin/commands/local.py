"""mqadmin's own state: the audit log (`audit`) and named contexts (`context ...`)."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.protocol.signature import Credentials
from mqadmin import config, credentials, history, render
from mqadmin.commands import guarded
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.options import DebugOpt, OutputOpt
from mqadmin.render import OutputFormat

app = typer.Typer()
contexts = typer.Typer(help="Saved clusters: `mqadmin <command> --context NAME` uses one.",
                       no_args_is_help=True)
app.add_typer(contexts, name="context", rich_help_panel="mqadmin itself")

PANEL = "mqadmin itself"
CONTEXT_COLUMNS = ("current", "name", "namesrv", "accessKey", "description")

NameArg = Annotated[str, typer.Argument(help="Context name.")]


@app.command("audit", rich_help_panel=PANEL)
def audit(
    limit: Annotated[int, typer.Option("--limit", min=1, help="Newest records to show.")] = 20,
    command: Annotated[str | None, typer.Option("--command",
                                                help="Only this command's records.")] = None,
    record_id: Annotated[int | None, typer.Option(
        "--id", help="One record in full: arguments, plan and verified result.")] = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List the changes mqadmin made (when, who, context, command, outcome), oldest first."""
    with guarded(debug):
        if record_id is not None:
            rows = history.records(record_id=record_id, detail=True)
            if not rows:
                raise TargetNotFound(f"no audit record {record_id}; list them with "
                                     "`mqadmin audit`.")
            render.render(rows, output, columns=history.AUDIT_DETAIL_COLUMNS, vertical=True)
            return
        rows = history.records(limit=limit, command=command)
        render.render(rows, output, columns=history.AUDIT_COLUMNS)


def _show(saved: config.Contexts, output: OutputFormat) -> None:
    """The saved contexts, as rows (what add, use and remove leave)."""
    keys = credentials.load_all()
    rows = [{"current": name == saved.current, "name": name, "namesrv": c.namesrv,
             "accessKey": keys[name].access_key if name in keys else "",
             "description": c.description} for name, c in sorted(saved.contexts.items())]
    render.render(rows, output, columns=CONTEXT_COLUMNS)


@contexts.command("add")
def context_add(
    name: NameArg,
    namesrv: Annotated[str, typer.Option("-n", "--namesrvAddr", metavar="ADDRS",
                                         help="The cluster's name servers.")],
    description: Annotated[str, typer.Option("--description", help="A note.")] = "",
    use: Annotated[bool, typer.Option("--use", help="Make it the current context.")] = False,
    access_key: Annotated[str | None, typer.Option(
        "--access-key", help="Sign requests with this AccessKey (brokers with ACL on).")] = None,
    secret_key_file: Annotated[str | None, typer.Option(
        "--secret-key-file", metavar="FILE",
        help="File holding the SecretKey ('-' reads stdin); stored mode 0600.")] = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Save (or replace) a context: a name for a cluster's name servers (and its keys)."""
    with guarded(debug):
        config.check_addrs(namesrv)
        if bool(access_key) != bool(secret_key_file):
            raise UsageProblem("give --access-key and --secret-key-file together (the secret "
                               "is read from a file so it stays out of shell history).")
        creds = (Credentials(access_key, credentials.read_secret_file(secret_key_file))
                 if access_key and secret_key_file else None)
        credentials.set_context(name, creds)
        saved = config.load()
        saved.contexts[name] = config.Context(name, namesrv.strip(), description)
        if use or saved.current is None:
            saved.current = name
        path = config.save(saved)
        _show(saved, output)
        render.note(f"context '{name}' saved in {path}"
                    + (" (current)" if saved.current == name else ""))


@contexts.command("use")
def context_use(name: NameArg, output: OutputOpt = OutputFormat.TABLE,
                debug: DebugOpt = False) -> None:
    """Make a saved context the current one (used when neither -n, --context nor
    NAMESRV_ADDR is given)."""
    with guarded(debug):
        saved = config.load()
        if name not in saved.contexts:
            raise TargetNotFound(f"no context named '{name}'; list them with "
                                 "`mqadmin context list`.")
        saved.current = name
        config.save(saved)
        _show(saved, output)
        render.note(f"current context: {name}")


@contexts.command("list")
def context_list(output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """List the saved contexts."""
    with guarded(debug):
        _show(config.load(), output)


@contexts.command("remove")
def context_remove(name: NameArg, output: OutputOpt = OutputFormat.TABLE,
                   debug: DebugOpt = False) -> None:
    """Forget a saved context."""
    with guarded(debug):
        saved = config.load()
        if saved.contexts.pop(name, None) is None:
            raise TargetNotFound(f"no context named '{name}'; list them with "
                                 "`mqadmin context list`.")
        if saved.current == name:
            saved.current = None
        config.save(saved)
        credentials.set_context(name, None)
        _show(saved, output)
        render.note(f"context '{name}' removed")
