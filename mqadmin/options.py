"""Options shared by mqadmin's commands, as `Annotated` aliases, and their resolution."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.remoting.address import parse_addr_list
from mqadmin.exit_codes import UsageProblem
from mqadmin.render import OutputFormat

NAMESRV_ENV = "NAMESRV_ADDR"

NamesrvOpt = Annotated[
    str | None,
    typer.Option(
        "-n", "--namesrvAddr", envvar=NAMESRV_ENV, show_envvar=True, metavar="ADDRS",
        help="Name server address(es), e.g. 192.168.0.1:9876;192.168.0.2:9876.",
    ),
]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option("-o", "--output", case_sensitive=False,
                 help="table (rich on a terminal, aligned columns when piped), json or csv."),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", help="Apply without asking (required when stdin is not a terminal)."),
]
DebugOpt = Annotated[
    bool,
    typer.Option("--debug", help="Show the traceback of an error."),
]


def namesrv_addrs(value: str | None) -> list[str]:
    """The name-server list from ``-n`` or NAMESRV_ADDR.

    Raises:
        UsageProblem: neither is set, or an entry is not host:port.
    """
    if value is None or not value.strip():
        raise UsageProblem(
            f"no name server address: pass -n host:port or set {NAMESRV_ENV} "
            f"(e.g. export {NAMESRV_ENV}=127.0.0.1:9876).")
    try:
        addrs = parse_addr_list(value)
    except ValueError as exc:
        raise UsageProblem(
            f"bad name server address list {value!r}: {exc}. Pass -n host:port "
            "(several separated by ';').") from None
    if not addrs:
        raise UsageProblem(f"no name server address in {value!r}: pass -n host:port.")
    return addrs
