"""What every command shares: resolving the cluster, running async work, error reporting,
and the terminal as the change runner's front-end (`Terminal`, `run_change`: the plan on
stderr, the question or --yes, the progress bars, the verified rows; `mutate` runs a
`Mutation` through it)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import typer

from engine.client.admin.cluster import MQAdmin
from engine.remoting import loop
from engine.remoting.errors import RemotingError
from mqadmin import render
from mqadmin.config import Endpoint, resolve
from mqadmin.exit_codes import (
    INTERRUPTED_MESSAGE,
    ConfirmationRequired,
    Declined,
    ExitCode,
    exit_code_for,
    message_for,
)
from mqadmin.operations import change
from mqadmin.operations import mutation as mut
from mqadmin.render import OutputFormat

T = TypeVar("T")
S = TypeVar("S")
#: How many of a change's detail rows (the copies a resend could not send) are shown.
DETAILS_SHOWN = 50


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


async def _on_admin(where: Endpoint, work: Callable[[MQAdmin], Awaitable[T]]) -> T:
    """`work` with an `MQAdmin` over the name servers of `where`, closed after it."""
    async with MQAdmin(where.addrs, credentials=where.credentials) as admin:
        admin.namesrv.on_failover = _failover_warning
        return await work(admin)


def with_admin(where: Endpoint, work: Callable[[MQAdmin], Awaitable[T]]) -> T:
    """Run `work` with an `MQAdmin` over the name servers of `where` on a fresh loop."""
    return loop.run_once(_on_admin(where, work))


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


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C interrupts at once while a question waits inside an event loop (whose own
    handler would only cancel its task, unseen until the answer)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True, slots=True)
class _TerminalProgress:
    """A change's progress on stderr: counts on the progress bar, steps as notes."""

    update: Callable[[int, int], None]

    def count(self, done: int, total: int) -> None:
        self.update(done, total)

    def step(self, text: str) -> None:
        render.note(text)


@contextlib.contextmanager
def _progress(description: str) -> Iterator[change.Progress]:
    """Steps as notes, and counts on a progress bar named `description` ("": no bar)."""
    if not description:
        yield _TerminalProgress(lambda done, total: None)
        return
    with render.progress(description) as update:
        yield _TerminalProgress(update)


@dataclass(frozen=True, slots=True)
class Terminal:
    """The CLI as the change runner's front-end: fresh connections for each step, the plan
    on stderr (the output with --dry-run, or when there is nothing to do), the question on
    the terminal or --yes, a progress bar while applying when the change counts (and while
    planning, named `reading`, when given)."""

    endpoint: Endpoint
    yes: bool
    output: OutputFormat
    dry_run: bool = False
    via: str | None = None
    reading: str = ""

    async def call(self, work: Callable[[MQAdmin], Awaitable[T]]) -> T:
        return await _on_admin(self.endpoint, work)

    async def confirm(self, planned: change.Planned[Any]) -> bool:
        """Show the plan; ask (no connection is open while the question waits)."""
        if self.dry_run or planned.nothing:
            if planned.detail_columns:
                render.plan(f"{planned.action} plan:", planned.rows, planned.columns)
                render.render(planned.details, self.output, columns=planned.detail_columns)
            else:
                render.render(planned.rows, self.output, columns=planned.columns)
            render.note(f"{planned.action}: " + ("dry run, nothing was changed."
                                                 if self.dry_run else f"{planned.nothing}."))
            return False
        render.plan(f"{planned.action} plan:", planned.rows, planned.columns)
        if planned.details:
            render.plan(f"{planned.action} details:", planned.details, planned.detail_columns)
        with interruptible():
            confirm(planned.action, self.yes, planned.noun)
        return True

    def planning(self) -> contextlib.AbstractContextManager[change.Progress]:
        return _progress(self.reading)

    def applying(self, planned: change.Planned[Any]
                 ) -> contextlib.AbstractContextManager[change.Progress]:
        return _progress(planned.action if planned.counted else "")


def run_change(front: Terminal, chg: change.Change[Any], *, empty_rows: bool = False,
               details: str = "") -> None:
    """`chg` through the change runner with the terminal as its front-end, then how it
    ended: the verified rows on stdout (after a failure only when there are some, unless
    `empty_rows`), its first details on stderr under the title `details`, a warning when the
    audit log could not be written, and the error, if any, raised."""
    outcome = loop.run_once(change.run(chg, front))
    if outcome is None:
        return
    if outcome.rows or outcome.ok or empty_rows:
        render.render(outcome.rows, front.output, columns=outcome.columns)
    if details and outcome.details:
        render.plan(details, outcome.details[:DETAILS_SHOWN], outcome.detail_columns)
    if outcome.audit_warning:
        render.warn(outcome.audit_warning)
    if outcome.error is not None:
        raise outcome.error


def mutate(where: Endpoint, build: Callable[[MQAdmin], mut.Mutation[S]], *, yes: bool,
           output: OutputFormat, dry_run: bool = False,
           args: Mapping[str, Any] | None = None) -> None:
    """Plan (shown on stderr), confirm, apply, verify, render the verified rows, audit:
    the change runner with the terminal as its front-end.

    With `dry_run` the plan (or its detail rows) is the output and nothing changes.  Each
    step opens its own connections, so none is open while the question waits: however long
    the operator takes, the apply step starts on fresh ones.
    """
    run_change(Terminal(where, yes, output, dry_run), change.MutationChange(build, args))


def params(ctx: typer.Context) -> dict[str, Any]:
    """The command's parameters as parsed, for the audit log."""
    return {k: (v.value if hasattr(v, "value") else v) for k, v in ctx.params.items()}
