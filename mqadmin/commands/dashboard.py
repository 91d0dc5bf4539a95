"""`mqadmin dashboard`: the terminal dashboard (mqadmin/tui) on the chosen cluster."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mqadmin.commands import guarded
from mqadmin.config import resolve_many
from mqadmin.exit_codes import UsageProblem
from mqadmin.options import AllContextsOpt, ContextsOpt, DebugOpt, NamesrvOpt

app = typer.Typer()


@app.command("dashboard", rich_help_panel="mqadmin itself")
def dashboard(
    namesrv: NamesrvOpt = None,
    context: ContextsOpt = None,
    all_contexts: AllContextsOpt = False,
    readonly: Annotated[bool, typer.Option(
        "--readonly", help="Show everything, change nothing (every change is refused).")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Open the terminal dashboard: cluster, topics, consumer groups, replication, cleanup
    and the audit log, with the CLI's plan / confirm / apply / verify for every change.
    Press ? in it for the keys; q quits (the cluster keeps running).  With several
    clusters (--context repeated, or --all-contexts) it opens on the fleet view: one row per
    cluster, Enter opens that cluster's screens."""
    with guarded(debug):
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageProblem("the dashboard needs a terminal (stdin and stdout): run it in "
                               "one, over SSH with `ssh -t`; scripts use the other commands.")
        where = resolve_many(namesrv, context or [], all_contexts)
        from mqadmin.tui.app import Dashboard  # textual loads only for this command

        Dashboard(where[0], readonly=readonly, fleet=where if len(where) > 1 else ()).run()
