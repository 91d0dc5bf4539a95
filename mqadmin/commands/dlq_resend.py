"""Dead letters: dlq resend (plan, confirm, send through the ledger, resume) and dlq discard,
through the change runner with the terminal as its front-end (the dashboard runs the same
changes, operations/dlq/resend.py and dlq_discard.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from mqadmin import render
from mqadmin.commands import Terminal, confirm, endpoint, guarded, interruptible, params, run_change
from mqadmin.commands.dlq_options import (
    KeyFilter,
    LimitOpt,
    SinceFilter,
    TagFilter,
    TopicFilter,
    UntilFilter,
    filters,
)
from mqadmin.exit_codes import CliError, ExitCode, UsageProblem
from mqadmin.operations.change import Planned
from mqadmin.operations.dlq import discard as dlq_discard
from mqadmin.operations.dlq import resend as dlq_resend
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

OptGroupOpt = Annotated[str | None, typer.Option("-g", "--group", help="Consumer group.")]
READING = "reading dead letters"
NOT_SENT = "not sent:"


class ResendInterrupted(CliError):
    """Ctrl-C during a resend: the batch is to be finished with --resume."""

    code = ExitCode.INTERRUPTED


def _ids(path: Path | None) -> frozenset[str] | None:
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageProblem(f"cannot read --ids {path}: {exc}.") from None
    ids = frozenset(line.strip() for line in text.splitlines()
                    if line.strip() and not line.startswith("#"))
    if not ids:
        raise UsageProblem(f"--ids {path} names no dead letter (one message id a line).")
    return ids


@dataclass(frozen=True, slots=True)
class _Resending(Terminal):
    """The terminal for a resend: what the plan leaves out and who else receives the copies
    as notes, the plan titled with its count, and a dry run that sends nothing."""

    async def confirm(self, planned: Planned[Any]) -> bool:
        plan: dlq_resend.ResendPlan = planned.plan
        if plan.skipped:
            render.note(f"{plan.skipped} dead letters already resent or discarded are "
                        "left out (--again to include them).")
        others = sorted({g for gs in plan.other_groups.values() for g in gs})
        if others:
            render.warn(f"--to topic: groups {', '.join(others)} also receive the copies.")
        if self.dry_run or planned.nothing:
            render.render(planned.rows, self.output, columns=planned.columns)
            render.note("dlq resend: " + ("dry run, nothing was sent." if self.dry_run
                                          else f"{planned.nothing}."))
            return False
        render.plan(f"dlq resend plan ({len(plan.letters)} dead letters of {plan.group}):",
                    planned.rows, planned.columns)
        with interruptible():
            confirm(planned.action, self.yes, planned.noun)
        return True


def resend(
    ctx: typer.Context,
    group: OptGroupOpt = None,
    topic: TopicFilter = None,
    key: KeyFilter = None,
    tag: TagFilter = None,
    since: SinceFilter = None,
    until: UntilFilter = None,
    limit: LimitOpt = None,
    ids: Annotated[Path | None, typer.Option(
        "--ids", help="Only the dead letters named in this file, one a line: message id, offset "
                "message id, or BROKER:QUEUE:OFFSET.")
    ] = None,
    to: Annotated[str, typer.Option(
        "--to", help="retry: to %RETRY%GROUP, only this group gets them; topic: to the "
                     "original topic, every subscribed group gets them.")] = "retry",
    rate: Annotated[float | None, typer.Option("--rate", min=0.1,
                                               help="At most this many sends a second.")] = None,
    again: Annotated[bool, typer.Option(
        "--again", help="Also those the ledger records as resent or discarded.")] = False,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="BATCH", help="Finish an interrupted batch.")] = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Resend dead letters (body, keys, tags, properties kept; reconsume times from 0), each
    recorded in the ledger before and after its send; --resume finishes a batch without
    sending anything twice."""
    with guarded(debug):
        where = endpoint(namesrv, context)
        if resume:
            run_change(Terminal(where, yes, output, dry_run),
                       dlq_resend.ResumeChange(resume.strip(), rate=rate, args=params(ctx)),
                       details=NOT_SENT)
            return
        if not group:
            raise UsageProblem("dlq resend needs -g GROUP (or --resume BATCH).")
        change = dlq_resend.ResendChange(
            group.strip(), filters(topic, key, tag, since, until, limit, _ids(ids)), to=to,
            again=again, rate=rate, args=params(ctx))
        try:
            run_change(_Resending(where, yes, output, dry_run, reading=READING), change,
                       details=NOT_SENT)
        except KeyboardInterrupt:
            if change.batch is None:
                raise
            raise ResendInterrupted(
                f"interrupted: batch {change.batch} is part sent (the ledger says which). "
                f"Finish it with `mqadmin dlq resend --resume {change.batch}`; a plain "
                "re-run would leave its unsent dead letters out.") from None


def discard(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("-g", "--group", help="Consumer group.")],
    reason: Annotated[str, typer.Option("--reason", help="Why they need no resend.")],
    topic: TopicFilter = None,
    key: KeyFilter = None,
    tag: TagFilter = None,
    since: SinceFilter = None,
    until: UntilFilter = None,
    limit: LimitOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    namesrv: NamesrvOpt = None,
    context: ContextOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Mark dead letters handled without resending them (recorded in the ledger with the
    reason; nothing is deleted)."""
    with guarded(debug):
        change = dlq_discard.DiscardChange(group.strip(), reason,
                                           filters(topic, key, tag, since, until, limit),
                                           args=params(ctx))
        run_change(Terminal(endpoint(namesrv, context), yes, output, dry_run, reading=READING),
                   change)
