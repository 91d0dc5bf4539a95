"""`mqadmin dashboard`: the terminal dashboard (mqadmin/tui) on the chosen cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.commands import endpoint, guarded
from mqadmin.options import ContextOpt, DebugOpt, NamesrvOpt

app = typer.Typer()


@app.command("dashboard", rich_help_panel="mqadmin itself")
def dashboard(
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    readonly: Annotated[bool, typer.Option(
        "--readonly", help="Show everything, change nothing (every change is refused).")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Open the terminal dashboard: cluster, topics, consumer groups, replication, cleanup
    and the audit log, with the CLI's plan / confirm / apply / verify for every change.
    Press ? in it for the keys; q quits (the cluster keeps running)."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        from mqadmin.tui.app import Dashboard  # textual loads only for this command

        Dashboard(where, readonly=readonly).run()
