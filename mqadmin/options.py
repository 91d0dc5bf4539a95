"""Options shared by mqadmin's commands, as `Annotated` aliases, and their value parsers.

Short and long names are Apache mqadmin's (``-n/--namesrvAddr``, ``-c/--clusterName``,
``-b/--brokerAddr``, ``-t/--topic``, ...), so runbooks keep working.  Apache's boolean
options take a value (``-o true``); `Flag` keeps that form.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from mqadmin.config import NAMESRV_ENV, check_addrs
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.times import format_time, parse_timestamp
from mqadmin.render import OutputFormat

__all__ = ["NAMESRV_ENV", "OutputFormat", "format_time", "parse_timestamp"]

NamesrvOpt = Annotated[
    str | None,
    typer.Option(
        "-n", "--namesrvAddr", metavar="ADDRS",
        help="Name server address(es), e.g. 192.168.0.1:9876;192.168.0.2:9876 "
             f"(default: ${NAMESRV_ENV}, else the current context).",
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option("--context", metavar="NAME", envvar="MQADMIN_CONTEXT",
                 help="Use the name servers of a saved context (see `mqadmin context`)."),
]
ContextsOpt = Annotated[
    list[str] | None,
    typer.Option("--context", metavar="NAME", envvar="MQADMIN_CONTEXT",
                 help="A saved context (see `mqadmin context`); repeat it for several "
                      "clusters at once."),
]
AllContextsOpt = Annotated[
    bool,
    typer.Option("--all-contexts", help="Every saved context (`mqadmin context list`)."),
]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option("-o", "--output", case_sensitive=False,
                 help="table (rich on a terminal, aligned columns when piped), json or csv."),
]
#: For the commands where Apache's ``-o`` means something else (order, offset, offline).
OutputLongOpt = Annotated[
    OutputFormat,
    typer.Option("--output", case_sensitive=False,
                 help="table, json or csv (here -o keeps Apache's meaning)."),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", help="Apply without asking (required when stdin is not a terminal)."),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the plan and change nothing."),
]
DebugOpt = Annotated[
    bool,
    typer.Option("--debug", help="Show the traceback of an error."),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option("-c", "--clusterName", metavar="CLUSTER",
                 help="Every master broker of this cluster."),
]
BrokerAddrOpt = Annotated[
    str | None,
    typer.Option("-b", "--brokerAddr", metavar="HOST:PORT", help="One broker, by address."),
]
TopicOpt = Annotated[str, typer.Option("-t", "--topic", help="Topic name.")]


class Flag(StrEnum):
    """Apache's value-taking booleans: ``-o true``."""

    TRUE = "true"
    FALSE = "false"

    def __bool__(self) -> bool:
        return self is Flag.TRUE


def namesrv_addrs(value: str | None) -> list[str]:
    """The name-server list from ``-n`` or NAMESRV_ADDR (kept for callers without contexts).

    Raises:
        UsageProblem: neither is set, or an entry is not host:port.
    """
    if value is None or not value.strip():
        raise UsageProblem(
            f"no name server address: pass -n host:port or set {NAMESRV_ENV} "
            f"(e.g. export {NAMESRV_ENV}=127.0.0.1:9876).")
    return check_addrs(value)


def one_target(broker_addr: str | None, cluster: str | None) -> tuple[str | None, str | None]:
    """``-b`` or ``-c``, exactly one, stripped.

    Raises:
        UsageProblem: neither or both.
    """
    b = broker_addr.strip() if broker_addr else None
    c = cluster.strip() if cluster else None
    if bool(b) == bool(c):
        raise UsageProblem("pass either -b host:port (one broker) or -c cluster (its masters); "
                           "list both with `mqadmin clusterList`.")
    return b, c
