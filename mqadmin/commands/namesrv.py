"""Name-server commands: settings and KV config."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import render
from mqadmin.commands import endpoint, guarded, mutate, params, run
from mqadmin.operations import namesrv as ops
from mqadmin.operations.mutation import settle
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Name server"

NamespaceOpt = Annotated[str, typer.Option("-s", "--namespace", help="KV namespace.")]


@app.command("getNamesrvConfig", rich_help_panel=PANEL)
def get_namesrv_config(
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the settings of every name server."""
    with guarded(debug):
        gathered = run(namesrv, context, lambda admin: ops.namesrv_config(admin.namesrv))
        if gathered.rows or not gathered.failures:
            render.render(gathered.rows, output, columns=ops.CONFIG_COLUMNS)
        settle("getNamesrvConfig", gathered)


@app.command("updateNamesrvConfig", rich_help_panel=PANEL)
def update_namesrv_config(
    ctx: typer.Context,
    key: Annotated[str, typer.Option("-k", "--key", help="Setting name.")],
    value: Annotated[str, typer.Option("-v", "--value", help="New value.")],
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Change one setting on every name server."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_namesrv_config(admin.namesrv, key.strip(),
                                                       value.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("updateKvConfig", rich_help_panel=PANEL)
def update_kv_config(
    ctx: typer.Context,
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("-k", "--key", help="Key name.")],
    value: Annotated[str, typer.Option("-v", "--value", help="Value.")],
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Create or update a KV config item on every name server."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_kv_config(admin.namesrv, namespace.strip(),
                                                  key.strip(), value.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteKvConfig", rich_help_panel=PANEL)
def delete_kv_config(
    ctx: typer.Context,
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("-k", "--key", help="Key name.")],
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Delete a KV config item on every name server."""
    with guarded(debug):
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_kv_config(admin.namesrv, namespace.strip(),
                                                  key.strip()),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))
