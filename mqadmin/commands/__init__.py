"""What every command shares: running async work, error reporting, the mutation flow."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import typer

from engine.client.namesrv import NamesrvAdmin
from engine.remoting import loop
from engine.remoting.errors import RemotingError
from mqadmin import render
from mqadmin.exit_codes import (
    INTERRUPTED_MESSAGE,
    ConfirmationRequired,
    Declined,
    ExitCode,
    exit_code_for,
    message_for,
)
from mqadmin.operations import namesrv as ops
from mqadmin.options import namesrv_addrs
from mqadmin.render import OutputFormat

T = TypeVar("T")
S = TypeVar("S")


@contextlib.contextmanager
def guarded(debug: bool) -> Iterator[None]:
    """Turn any exception into one stderr message and its exit code (traceback with --debug)."""
    try:
        yield
    except typer.Exit:
        raise
    except (KeyboardInterrupt, typer.Abort) as exc:
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        render.error(INTERRUPTED_MESSAGE)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except Exception as exc:
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        render.error(message_for(exc))
        raise typer.Exit(exit_code_for(exc)) from None


def _failover_warning(addr: str, exc: RemotingError) -> None:
    render.warn(f"name server {addr} unreachable ({exc}); trying the next one")


def with_admin(namesrv: str | None, work: Callable[[NamesrvAdmin], Awaitable[T]]) -> T:
    """Run `work` with an admin over the ``-n`` / NAMESRV_ADDR servers on a fresh loop."""
    addrs = namesrv_addrs(namesrv)

    async def main() -> T:
        async with NamesrvAdmin(addrs) as admin:
            admin.on_failover = _failover_warning
            return await work(admin)

    return loop.run(main())


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def confirm(action: str, yes: bool) -> None:
    """Ask on the terminal unless --yes.

    Raises:
        ConfirmationRequired: no terminal to ask on and no --yes.
        Declined: the operator said no.
    """
    if yes:
        return
    if not stdin_is_terminal():
        raise ConfirmationRequired(
            f"{action} changes the name servers and stdin is not a terminal to confirm on: "
            "pass --yes to apply.")
    if not typer.confirm(f"Apply {action}?", default=False, err=True):
        raise Declined(f"{action} not applied: nothing was changed. Re-run it and answer y "
                       "to apply.")


def mutate(namesrv: str | None, build: Callable[[NamesrvAdmin], ops.Mutation[S]], *,
           yes: bool, output: OutputFormat) -> None:
    """Plan (shown on stderr), confirm, apply, verify, render the verified rows, settle.

    The question is asked between two event loops, with no connection open, so however long
    the operator takes, the apply phase starts on fresh connections.
    """
    planned = with_admin(namesrv, lambda admin: ops.plan(admin, build(admin)))
    action = planned.mutation.action
    render.plan(f"{action} plan:", planned.rows, ops.PLAN_COLUMNS)
    confirm(action, yes)
    applied = with_admin(namesrv, lambda admin: ops.apply(admin, planned.rebind(build(admin))))
    if applied.rows or not applied.failures:
        render.render(applied.rows, output, columns=ops.RESULT_COLUMNS)
    ops.settle_applied(applied)
