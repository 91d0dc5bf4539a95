"""Name-server commands: settings, KV config and broker write permission."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.commands import guarded, mutate, with_admin
from mqadmin.operations import namesrv as ops
from mqadmin.options import DebugOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat, render

app = typer.Typer()

PANEL = "Name server"

NamespaceOpt = Annotated[str, typer.Option("-s", "--namespace", help="KV namespace.")]
BrokerNameOpt = Annotated[str, typer.Option("-b", "--brokerName", help="Broker name.")]


@app.command("getNamesrvConfig", rich_help_panel=PANEL)
def get_namesrv_config(
    namesrv: NamesrvOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the settings of every name server."""
    with guarded(debug):
        gathered = with_admin(namesrv, ops.namesrv_config)
        if gathered.rows or not gathered.failures:
            render(gathered.rows, output, columns=ops.CONFIG_COLUMNS)
        ops.settle("getNamesrvConfig", gathered)


@app.command("updateNamesrvConfig", rich_help_panel=PANEL)
def update_namesrv_config(
    key: Annotated[str, typer.Option("-k", "--key", help="Setting name.")],
    value: Annotated[str, typer.Option("-v", "--value", help="New value.")],
    namesrv: NamesrvOpt = None,
    yes: YesOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Change one setting on every name server."""
    with guarded(debug):
        mutate(namesrv, lambda admin: ops.update_namesrv_config(admin, key.strip(),
                                                                value.strip()),
               yes=yes, output=output)


@app.command("updateKvConfig", rich_help_panel=PANEL)
def update_kv_config(
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("-k", "--key", help="Key name.")],
    value: Annotated[str, typer.Option("-v", "--value", help="Value.")],
    namesrv: NamesrvOpt = None,
    yes: YesOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Create or update a KV config item on every name server."""
    with guarded(debug):
        mutate(namesrv, lambda admin: ops.update_kv_config(admin, namespace.strip(),
                                                           key.strip(), value.strip()),
               yes=yes, output=output)


@app.command("deleteKvConfig", rich_help_panel=PANEL)
def delete_kv_config(
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("-k", "--key", help="Key name.")],
    namesrv: NamesrvOpt = None,
    yes: YesOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Delete a KV config item on every name server."""
    with guarded(debug):
        mutate(namesrv, lambda admin: ops.delete_kv_config(admin, namespace.strip(),
                                                           key.strip()),
               yes=yes, output=output)


@app.command("wipeWritePerm", rich_help_panel=PANEL)
def wipe_write_perm(
    broker_name: BrokerNameOpt,
    namesrv: NamesrvOpt = None,
    yes: YesOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Take write permission away from every topic of a broker, on every name server.

    Producers stop sending to the broker: use it before taking the broker down.
    """
    with guarded(debug):
        mutate(namesrv, lambda admin: ops.wipe_write_perm(admin, broker_name.strip()),
               yes=yes, output=output)


@app.command("addWritePerm", rich_help_panel=PANEL)
def add_write_perm(
    broker_name: BrokerNameOpt,
    namesrv: NamesrvOpt = None,
    yes: YesOpt = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Give write permission back to every topic of a broker, on every name server."""
    with guarded(debug):
        mutate(namesrv, lambda admin: ops.add_write_perm(admin, broker_name.strip()),
               yes=yes, output=output)
