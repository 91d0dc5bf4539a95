"""What every command shares: resolving the cluster, running async work, error reporting,
and the mutation flow (plan, confirm, apply, verify, audit)."""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import typer

from engine.client.admin import MQAdmin
from engine.remoting import loop
from engine.remoting.errors import RemotingError
from mqadmin import history, render
from mqadmin.config import Endpoint, resolve
from mqadmin.exit_codes import (
    INTERRUPTED_MESSAGE,
    CliError,
    ConfirmationRequired,
    Declined,
    ExitCode,
    exit_code_for,
    message_for,
)
from mqadmin.operations import mutation as mut
from mqadmin.render import OutputFormat

T = TypeVar("T")
S = TypeVar("S")

#: Parameters that do not belong in the audit log's record of a command.
NOT_AUDITED = frozenset({"output", "debug", "yes", "dry_run"})
#: Parameters recorded only as "******" (secrets never reach the audit log).
SECRET_ARGS = frozenset({"password", "password_file", "secret_key", "secret_key_file"})


@contextlib.contextmanager
def log_records(debug: bool) -> Iterator[None]:
    """Log records (of the client library, say) reach stderr only with --debug; without it
    they go nowhere, not to Python's last-resort handler: what a user must see is an error
    message."""
    root = logging.getLogger()
    handler: logging.Handler = logging.NullHandler()
    level = root.level
    if debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: "
                                               "%(message)s"))
        root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@contextlib.contextmanager
def guarded(debug: bool) -> Iterator[None]:
    """Turn any exception into one stderr message and its exit code (traceback with --debug)."""
    try:
        with log_records(debug):
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


def endpoint(namesrv: str | None, context: str | None = None) -> Endpoint:
    """The name servers of ``-n`` / ``--context`` / NAMESRV_ADDR / the current context."""
    return resolve(namesrv, context)


def with_admin(where: Endpoint, work: Callable[[MQAdmin], Awaitable[T]]) -> T:
    """Run `work` with an `MQAdmin` over the name servers of `where` on a fresh loop."""

    async def main() -> T:
        async with MQAdmin(where.addrs, credentials=where.credentials) as admin:
            admin.namesrv.on_failover = _failover_warning
            return await work(admin)

    return loop.run(main())


def run(namesrv: str | None, context: str | None,
        work: Callable[[MQAdmin], Awaitable[T]]) -> T:
    """`with_admin` over the name servers the options name."""
    return with_admin(endpoint(namesrv, context), work)


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def confirm(action: str, yes: bool, noun: str = "name servers") -> None:
    """Ask on the terminal unless --yes.

    Raises:
        ConfirmationRequired: no terminal to ask on and no --yes.
        Declined: the operator said no.
    """
    if yes:
        return
    if not stdin_is_terminal():
        raise ConfirmationRequired(
            f"{action} changes the {noun} and stdin is not a terminal to confirm on: "
            "pass --yes to apply (or --dry-run to only see the plan).")
    if not typer.confirm(f"Apply {action}?", default=False, err=True):
        raise Declined(f"{action} not applied: nothing was changed. Re-run it and answer y "
                       "to apply.")


def audit(where: Endpoint | None, command: str, args: Mapping[str, Any], target: str, *,
          outcome: str, exit_code: int, plan: Sequence[Mapping[str, Any]] = (),
          result: Sequence[Mapping[str, Any]] = (), message: str = "") -> None:
    """Append to the audit log; a log that cannot be written is a warning, never a failure
    (the change has been made by then)."""
    record = history.AuditRecord(
        command, {k: ("******" if k in SECRET_ARGS and v else v) for k, v in args.items()
                  if k not in NOT_AUDITED}, target, outcome,
        int(exit_code), plan, result, where.context if where else None,
        where.text if where else "", message)
    try:
        history.append(record)
    except Exception as exc:  # sqlite3.Error, OSError: the audit log is not the change
        render.warn(f"could not append to the audit log {history.db_path()}: {exc}")


def mutate(where: Endpoint, build: Callable[[MQAdmin], mut.Mutation[S]], *, yes: bool,
           output: OutputFormat, dry_run: bool = False,
           args: Mapping[str, Any] | None = None) -> None:
    """Plan (shown on stderr), confirm, apply, verify, render the verified rows, audit.

    With `dry_run` the plan (or its detail rows) is the output and nothing changes.  The
    question is asked between two event loops, with no connection open, so however long
    the operator takes, the apply phase starts on fresh connections.
    """
    planned = with_admin(where, lambda admin: mut.plan(build(admin)))
    m = planned.mutation
    details = planned.detail_rows
    if dry_run:
        if m.details is not None:
            render.plan(f"{m.action} plan:", planned.rows, m.plan_columns)
            render.render(details, output, columns=m.detail_columns)
        else:
            render.render(planned.rows, output, columns=m.plan_columns)
        render.note(f"{m.action}: dry run, nothing was changed.")
        return
    render.plan(f"{m.action} plan:", planned.rows, m.plan_columns)
    if details:
        render.plan(f"{m.action} details:", details, m.detail_columns)
    confirm(m.action, yes, m.noun)
    audited = dict(args or {})
    try:
        with render.progress(m.action) as update:
            applied = with_admin(
                where, lambda admin: mut.apply(planned.rebind(build(admin)), update))
    except Exception as exc:
        audit(where, m.action, audited, m.target, outcome="failed",
              exit_code=exit_code_for(exc), plan=planned.rows, message=message_for(exc))
        raise
    if applied.rows or not applied.failures:
        render.render(applied.rows, output, columns=applied.columns)
    try:
        mut.settle_applied(applied)
    except CliError as exc:
        audit(where, m.action, audited, m.target, outcome=applied.outcome, exit_code=exc.code,
              plan=planned.rows, result=applied.rows, message=str(exc))
        raise
    audit(where, m.action, audited, m.target, outcome=applied.outcome, exit_code=ExitCode.OK,
          plan=planned.rows, result=applied.rows)


def params(ctx: typer.Context) -> dict[str, Any]:
    """The command's parameters as parsed, for the audit log."""
    return {k: (v.value if hasattr(v, "value") else v) for k, v in ctx.params.items()}
