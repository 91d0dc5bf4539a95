"""The `mqadmin` typer app, its command groups, and `main()` returning the exit code.

How this works: the whole app imports every command module, and through them the client,
the protocol and every operation: most of a short command's time.  `main()` builds an app of
only the module that owns the command asked for (`OWNER`), and the whole app for help, an
unknown command or anything else, so `mqadmin clusterList` loads the cluster commands and
what they need.  `app`, the whole app (for tests and the reference docs), is built on first
use.  tests/lag/test_startup.py holds `OWNER` to the modules' commands.

Typer turns an app into its click command anew on each call (80 ms for the whole app, most
of it evaluating every command's annotations): `command()` does it once per process, for
`main()` and for anything that runs commands in-process (the tests' runner, the reference
docs).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from mqadmin import render
from mqadmin.exit_codes import INTERRUPTED_MESSAGE, ExitCode

if TYPE_CHECKING:
    from typer._click import Command  # what typer.main.get_command returns

HELP = ("Operate RocketMQ clusters (this engine, or Apache RocketMQ 4.9/5.x).\n\n"
        "Commands and short flags are Apache mqadmin's.  The name servers come from -n, "
        "--context NAME, $NAMESRV_ADDR or the current context; -o table|json|csv chooses "
        "the output.  Changes show a plan, ask (or need --yes), are verified and logged "
        "(`mqadmin audit`).")
#: (module of mqadmin.commands, group name or None when its commands join the top level,
#: help panel), in the order of the top-level help.
MOUNTS: tuple[tuple[str, str | None, str | None], ...] = (
    *((m, None, None) for m in ("topic", "cluster", "group", "consumer", "message", "stream",
                                "namesrv", "store", "local", "ha", "controller", "acl",
                                "acl_v1", "trace")),
    ("dlq", "dlq", "Dead letters"), ("lag", "lag", "Consumer lag"),
    ("dev", "dev", "mqadmin itself"), ("dashboard", None, None),
    ("report", "report", "Consumer lag"),
)
_TOP = {
    "topic": "updateTopic deleteTopic topicList topicRoute topicConfig topicStatus "
             "topicClusterList updateTopicPerm updateOrderConf",
    "cluster": "clusterList brokerStatus getBrokerConfig updateBrokerConfig wipeWritePerm "
               "addWritePerm brokerConsumeStats statsAll clusterRT",
    "group": "updateSubGroup deleteSubGroup resetOffsetByTime skipAccumulatedMessage "
             "cloneGroupOffset",
    "consumer": "consumerProgress consumerConnection consumerStatus producerConnection "
                "allocateMQ",
    "message": "queryMsgById queryMsgByKey queryMsgByUniqueKey queryMsgByOffset queryCq "
               "consumeMessageDirectly resendMessage",
    "stream": "printMsg printMsgByQueue consumeMessage sendMessage checkMsgSendRT",
    "namesrv": "getNamesrvConfig updateNamesrvConfig updateKvConfig deleteKvConfig",
    "store": "cleanExpiredCQ deleteExpiredCommitLog cleanUnusedTopic",
    "local": "audit",
    "ha": "haStatus switchover failover",
    "controller": "getControllerMetaData getSyncStateSet getBrokerEpoch electMaster "
                  "cleanBrokerMetadata getControllerConfig updateControllerConfig",
    "acl": "createUser updateUser deleteUser getUser listUser createAcl updateAcl deleteAcl "
           "getAcl listAcl",
    "acl_v1": "updateAclConfig deleteAclConfig updateGlobalWhiteAddr clusterAclConfigVersion",
    "trace": "queryMsgTraceById",
    "dashboard": "dashboard",
}
#: The module that owns each top-level command or group.
OWNER = {name: module for module, names in _TOP.items() for name in names.split()} | {
    group: module for module, group, _panel in MOUNTS if group}


def build(modules: Iterable[str] | None = None) -> typer.Typer:
    """An app of the command modules `modules` (default: all of them)."""
    wanted = None if modules is None else set(modules)
    root = typer.Typer(name="mqadmin", help=HELP, no_args_is_help=True,
                       context_settings={"help_option_names": ["-h", "--help"]},
                       pretty_exceptions_enable=False, rich_markup_mode="markdown")
    for module, group, panel in MOUNTS:
        if wanted is not None and module not in wanted:
            continue
        sub = importlib.import_module(f"mqadmin.commands.{module}").app
        if group is None:
            root.add_typer(sub)
        else:
            root.add_typer(sub, name=group, rich_help_panel=panel)
    return root


_whole: list[typer.Typer] = []


def whole() -> typer.Typer:
    """The whole app (built once)."""
    if not _whole:
        _whole.append(build())
    return _whole[0]


_commands: dict[str | None, Command] = {}


def command(module: str | None = None) -> Command:
    """The click command of one command module's app, or of the whole app (built once)."""
    if module not in _commands:
        app = whole() if module is None else build([module])
        _commands[module] = typer.main.get_command(app)
    return _commands[module]


def __getattr__(name: str) -> Any:
    if name == "app":
        return whole()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run mqadmin with `argv` (default: the process arguments); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    owner = OWNER.get(args[0]) if args else None
    try:
        command(owner).main(args=args, prog_name="mqadmin")
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
