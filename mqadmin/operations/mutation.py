"""Mutations as plan / apply / verify over a set of servers (name servers or brokers).

How this works: a `Mutation` says where a change goes (`servers`, resolved when planning),
how to read the state it changes on one server, how to show that state, how to make the
change, and when a state read back counts as done.  `plan` reads every server; `apply`
changes every server the plan could read (at once, or in order when `sequential`) and reads
each one again, for up to `settle` seconds when the server applies the change in the
background; `settle_applied` turns failures into the right `CliError`.  The change runner
(change.py) runs them for the CLI and the dashboard alike: they return rows and never print.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from engine.client.core.errors import ClientError
from engine.client.core.namesrv import ServerOutcome
from mqadmin.exit_codes import NotVerified, ServersFailed

Row = dict[str, Any]
S = TypeVar("S")
T = TypeVar("T")

#: Seconds between reads while a change settles.
SETTLE_POLL = 0.1
#: How a server column is called in plural, for messages.
ROLE_NOUNS = {"nameServer": "name servers", "broker": "brokers", "server": "servers"}

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Mutation(Generic[S]):
    """One change, made on each of several servers; `S` is the state it reads back."""

    action: str  # Apache's command name, for messages and the audit log
    target: str  # what changes, as shown in the plan
    servers: Callable[[], Awaitable[list[str]]]  # where the change goes
    read: Callable[[str], Awaitable[S]]  # state on one server (by address)
    show: Callable[[S], str]
    done: Callable[[S, S], bool]  # (state planned on, state read back): did it take effect?
    apply: Callable[[str], Awaitable[str]]  # make the change on one server; what it reported
    after: str | Callable[[S], str]  # the promised state (from the planned state if callable)
    #: Refuses the plan given the states read (raise a `CliError`), e.g. an unknown broker.
    validate: Callable[[list[S]], None] | None = None
    role: str = "server"  # the name of the server column: nameServer, broker or server
    sequential: bool = False  # apply server after server, in `servers` order
    settle: float = 0.0  # seconds to keep re-reading a server until the change shows
    #: Rows detailing what the change will do on one server (shown with the plan and by
    #: --dry-run), and their columns.
    details: Callable[[str, S], list[Row]] | None = None
    detail_columns: tuple[str, ...] = ()

    @property
    def noun(self) -> str:
        return ROLE_NOUNS.get(self.role, "servers")

    @property
    def plan_columns(self) -> tuple[str, ...]:
        return (self.role, "target", "before", "after")

    @property
    def result_columns(self) -> tuple[str, ...]:
        return (self.role, "target", "before", "after", "result", "verified")

    def promised(self, state: S) -> str:
        return self.after(state) if callable(self.after) else self.after


@dataclass(frozen=True, slots=True)
class Plan(Generic[S]):
    mutation: Mutation[S]
    before: list[ServerOutcome[S]]

    def rebind(self, mutation: Mutation[S]) -> Plan[S]:
        """The same plan with the same mutation built over another admin (a new loop)."""
        return Plan(mutation, self.before)

    def state(self, addr: str) -> S:
        """The state read on `addr` (which must have been readable)."""
        outcome = next(o for o in self.before if o.addr == addr)
        return cast(S, outcome.value)

    @property
    def rows(self) -> list[Row]:
        m = self.mutation
        return [{m.role: o.addr, "target": m.target,
                 "before": m.show(self.state(o.addr)) if o.ok else f"(unreadable: {o.error})",
                 "after": m.promised(self.state(o.addr)) if o.ok else "(skipped)"}
                for o in self.before]

    @property
    def detail_rows(self) -> list[Row]:
        m = self.mutation
        if m.details is None:
            return []
        return [row for o in self.before if o.ok for row in m.details(o.addr, self.state(o.addr))]


@dataclass(frozen=True, slots=True)
class Applied:
    action: str
    rows: list[Row]
    failures: list[tuple[str, ClientError]]
    unverified: list[str]
    total: int
    noun: str = "servers"
    columns: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """How it ended, for the audit log."""
        if self.failures:
            return "partial" if len(self.failures) < self.total else "failed"
        return "unverified" if self.unverified else "applied"


async def outcome_of(addr: str, work: Awaitable[T]) -> ServerOutcome[T]:
    """`work`'s value or `ClientError` as the outcome of server `addr`."""
    try:
        return ServerOutcome(addr, await work)
    except ClientError as exc:
        return ServerOutcome(addr, error=exc)


def failures_of(outcomes: Sequence[ServerOutcome[Any]]) -> list[tuple[str, ClientError]]:
    return [(o.addr, o.error) for o in outcomes if o.error is not None]


async def plan(mutation: Mutation[S]) -> Plan[S]:
    """Read the current state on every server of the mutation.

    Raises:
        ServersFailed: no server could be read (nothing to change).
        CliError: whatever `servers` or `validate` raise (an unknown cluster, say).
    """
    servers = await mutation.servers()
    outcomes = list(await asyncio.gather(*(outcome_of(a, mutation.read(a)) for a in servers)))
    if not any(o.ok for o in outcomes):
        raise ServersFailed(mutation.action, failures_of(outcomes), len(outcomes),
                            noun=mutation.noun)
    if mutation.validate is not None:
        mutation.validate([cast(S, o.value) for o in outcomes if o.ok])
    return Plan(mutation, outcomes)


async def apply(planned: Plan[S], on_progress: Progress | None = None) -> Applied:
    """Apply on every server the plan could read, then re-read each to verify.

    The servers are listed again first (a mutation built anew for this phase learns there
    what its calls need, such as which addresses are brokers); the changes go only to the
    servers of the plan.
    """
    m = planned.mutation
    await m.servers()
    targets = [o.addr for o in planned.before if o.ok]
    loop = asyncio.get_running_loop()
    finished = 0

    def tick() -> None:
        nonlocal finished
        finished += 1
        if on_progress is not None:
            on_progress(finished, len(targets))

    async def verify(addr: str) -> S:
        deadline = loop.time() + m.settle
        while True:
            state = await m.read(addr)
            if m.done(planned.state(addr), state) or loop.time() >= deadline:
                return state
            await asyncio.sleep(SETTLE_POLL)

    async def change(addr: str) -> str:
        try:
            return await m.apply(addr)
        finally:
            tick()

    if m.sequential:
        changed = [await outcome_of(a, change(a)) for a in targets]
    else:
        changed = list(await asyncio.gather(*(outcome_of(a, change(a)) for a in targets)))
    reported = {o.addr: o.value for o in changed if o.ok}
    read_back = list(await asyncio.gather(*(outcome_of(a, verify(a)) for a in reported)))
    failures = failures_of(planned.before) + failures_of(changed) + failures_of(read_back)
    rows: list[Row] = []
    unverified: list[str] = []
    for outcome in read_back:
        if outcome.error is not None:
            continue
        state = cast(S, outcome.value)
        verified = m.done(planned.state(outcome.addr), state)
        if not verified:
            unverified.append(outcome.addr)
        rows.append({m.role: outcome.addr, "target": m.target,
                     "before": m.show(planned.state(outcome.addr)), "after": m.show(state),
                     "result": reported[outcome.addr], "verified": verified})
    return Applied(m.action, rows, failures, unverified, len(planned.before), m.noun,
                   m.result_columns)


def settle_applied(applied: Applied) -> None:
    """Raise what the outcome calls for: `ServersFailed` (partial or total), or
    `NotVerified` when a server accepted the change but re-reading shows it missing."""
    if applied.failures:
        raise ServersFailed(applied.action, applied.failures, applied.total, noun=applied.noun)
    if applied.unverified:
        raise NotVerified(
            f"{applied.action}: {', '.join(applied.unverified)} accepted the change, but "
            "reading it back shows the old state (some servers ignore unknown keys, some "
            "apply changes later). Check with the matching get/list command and the "
            "server's log.")


def fixed(addrs: Sequence[str]) -> Callable[[], Awaitable[list[str]]]:
    """`Mutation.servers` for a list known in advance."""
    async def servers() -> list[str]:
        return list(addrs)
    return servers


@dataclass(frozen=True, slots=True)
class Gathered:
    """Rows from every server that answered a read, and the ones that did not."""

    rows: list[Row]
    failures: list[tuple[str, ClientError]] = field(default_factory=list)
    total: int = 0
    noun: str = "name servers"


def settle(what: str, gathered: Gathered) -> None:
    """Raise `ServersFailed` (PARTIAL when some answered) if any server failed."""
    if gathered.failures:
        raise ServersFailed(what, gathered.failures, gathered.total, noun=gathered.noun)
