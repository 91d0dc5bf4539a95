"""The `mqadmin` typer app, its command groups, and `main()` returning the exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from mqadmin import render
from mqadmin.commands import (
    acl,
    acl_v1,
    cluster,
    consumer,
    dashboard,
    dev,
    dlq,
    group,
    ha,
    lag,
    local,
    message,
    namesrv,
    report,
    store,
    stream,
    topic,
    trace,
)
from mqadmin.exit_codes import INTERRUPTED_MESSAGE, ExitCode

app = typer.Typer(
    name="mqadmin",
    help="Operate RocketMQ clusters (this engine, or Apache RocketMQ 4.9/5.x).\n\n"
         "Commands and short flags are Apache mqadmin's.  The name servers come from -n, "
         "--context NAME, $NAMESRV_ADDR or the current context; -o table|json|csv chooses "
         "the output.  Changes show a plan, ask (or need --yes), are verified and logged "
         "(`mqadmin audit`).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
for module in (topic, cluster, group, consumer, message, stream, namesrv, store, local, ha,
               acl, acl_v1, trace):
    app.add_typer(module.app)
app.add_typer(dlq.app, name="dlq", rich_help_panel="Dead letters")
app.add_typer(lag.app, name="lag", rich_help_panel="Consumer lag")
app.add_typer(dev.app, name="dev", rich_help_panel="mqadmin itself")
app.add_typer(dashboard.app)
app.add_typer(report.app, name="report", rich_help_panel="Consumer lag")


def main(argv: Sequence[str] | None = None) -> int:
    """Run mqadmin with `argv` (default: the process arguments); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="mqadmin")
    except SystemExit as exc:
        if exc.code is None:
            return ExitCode.OK
        if isinstance(exc.code, int):
            return exc.code
        render.error(str(exc.code))
        return ExitCode.ERROR
    except KeyboardInterrupt:
        render.error(INTERRUPTED_MESSAGE)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # a bug outside any command's guard: still no traceback
        render.error(f"internal error: {type(exc).__name__}: {exc}. Report it with the "
                     "command line that caused it.")
        return ExitCode.ERROR
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
