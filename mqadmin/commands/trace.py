"""Message trace: queryMsgTraceById."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.protocol.trace import TRACE_TOPIC
from mqadmin import render
from mqadmin.commands import endpoint, guarded, with_admin
from mqadmin.operations.messages import trace as ops
from mqadmin.options import ContextOpt, DebugOpt, NamesrvOpt, OutputOpt
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Messages"


@app.command("queryMsgTraceById", rich_help_panel=PANEL)
def query_msg_trace_by_id(
    msg_id: Annotated[str, typer.Option("-i", "--msgId", help="Message id (or offset id).")],
    trace_topic: Annotated[str, typer.Option(
        "-t", "--traceTopic", help="The trace topic the clients write to.")] = TRACE_TOPIC,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show a message's trace: its send (Pub), each group's consumption (SubBefore when a
    listener got it, SubAfter with its cost and status) and transaction end, oldest first.
    Reads the records of Apache's Java clients and of this engine's."""
    with guarded(debug):
        key = msg_id.strip()
        found = with_admin(endpoint(namesrv, context),
                           lambda admin: ops.query_trace(admin, key, trace_topic.strip()))
        if found.msg_id != key:
            render.note(f"{key} is an offset message id; traces are kept under the message "
                        f"id {found.msg_id}")
        if found.malformed:
            render.warn(f"{found.malformed} malformed trace records skipped")
        render.render(found.rows, output, columns=ops.TRACE_COLUMNS)
