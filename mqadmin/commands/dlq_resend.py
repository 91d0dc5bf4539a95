"""Dead letters: dlq resend (plan, confirm, send through the ledger, resume) and dlq discard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mqadmin import render
from mqadmin.commands import audit, confirm, endpoint, guarded, params, with_admin
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
from mqadmin.operations import dlq_discard, dlq_resend
from mqadmin.operations.dlq_ledger import ledger_of
from mqadmin.options import ContextOpt, DebugOpt, DryRunOpt, NamesrvOpt, OutputOpt, YesOpt
from mqadmin.render import OutputFormat

OUTCOME_COLUMNS = ("batch", "total", "sent", "alreadyOnTarget", "failed")
OptGroupOpt = Annotated[str | None, typer.Option("-g", "--group", help="Consumer group.")]


class ResendInterrupted(CliError):
    """Ctrl-C during a resend: the batch is to be finished with --resume."""

    code = ExitCode.INTERRUPTED


class ResendIncomplete(CliError):
    """Some copies were not sent (SEND_OK): the ledger says which."""

    code = ExitCode.PARTIAL


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


def _finish(outcome: dlq_resend.ResendOutcome, output: OutputFormat) -> None:
    render.render([outcome.row()], output, columns=OUTCOME_COLUMNS)
    if outcome.failed:
        render.plan("not sent:", outcome.failed[:50], dlq_resend.FAILURE_COLUMNS)
        raise ResendIncomplete(
            f"{len(outcome.failed)} of {outcome.total} dead letters were not resent (the "
            f"ledger records each). See `mqadmin dlq status {outcome.batch}`, then finish "
            f"with `mqadmin dlq resend --resume {outcome.batch}`.")


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
        args: dict[str, Any] = params(ctx)
        if resume:
            def planned(outcome: dlq_resend.ResendOutcome, to_send: int) -> None:
                render.note(f"resuming batch {outcome.batch}: {outcome.sent} sent before, "
                            f"{outcome.found} found on the target, {to_send} to send")

            with ledger_of(where) as ledger, render.progress("dlq resend") as update:
                outcome = with_admin(where, lambda admin: dlq_resend.resume(
                    admin, ledger, resume.strip(), rate=rate, on_progress=update,
                    on_plan=planned))
            audit(where, "dlq resend", args, resume, outcome="partial" if outcome.failed
                  else "applied", exit_code=ExitCode.PARTIAL if outcome.failed else 0,
                  result=[outcome.row()])
            _finish(outcome, output)
            return
        if not group:
            raise UsageProblem("dlq resend needs -g GROUP (or --resume BATCH).")
        chosen = filters(topic, key, tag, since, until, limit, _ids(ids))
        with ledger_of(where) as ledger:
            with render.progress("reading dead letters") as update:
                plan = with_admin(where, lambda admin: dlq_resend.plan_resend(
                    admin, ledger, group.strip(), chosen, to=to, again=again,
                    on_progress=update))
            if plan.skipped:
                render.note(f"{plan.skipped} dead letters already resent or discarded are "
                            "left out (--again to include them).")
            others = sorted({g for gs in plan.other_groups.values() for g in gs})
            if others:
                render.warn(f"--to topic: groups {', '.join(others)} also receive the copies.")
            if dry_run or not plan.letters:
                render.render(plan.rows(), output, columns=dlq_resend.PLAN_COLUMNS)
                render.note("dlq resend: " + ("dry run, nothing was sent." if dry_run
                                              else "no dead letter to resend."))
                return
            render.plan(f"dlq resend plan ({len(plan.letters)} dead letters of "
                        f"{plan.group}):", plan.rows(), dlq_resend.PLAN_COLUMNS)
            confirm("dlq resend", yes, "cluster")

            opened: list[str] = []

            def started(batch: str) -> None:
                opened.append(batch)
                render.note(f"batch {batch}: if interrupted, finish it with `mqadmin dlq "
                            f"resend --resume {batch}`")

            try:
                with render.progress("dlq resend") as update:
                    outcome = with_admin(where, lambda admin: dlq_resend.resend(
                        admin, ledger, plan, rate=rate, on_progress=update,
                        on_batch=started))
            except KeyboardInterrupt:
                if not opened:
                    raise
                raise ResendInterrupted(
                    f"interrupted: batch {opened[0]} is part sent (the ledger says which). "
                    f"Finish it with `mqadmin dlq resend --resume {opened[0]}`; a plain "
                    "re-run would leave its unsent dead letters out.") from None
        audit(where, "dlq resend", args, outcome.batch,
              outcome="partial" if outcome.failed else "applied",
              exit_code=ExitCode.PARTIAL if outcome.failed else 0, plan=plan.rows(),
              result=[outcome.row()])
        _finish(outcome, output)


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
        where = endpoint(namesrv, context)
        chosen = filters(topic, key, tag, since, until, limit)
        with ledger_of(where) as ledger:
            with render.progress("reading dead letters") as update:
                plan = with_admin(where, lambda admin: dlq_discard.plan_discard(
                    admin, ledger, group.strip(), reason, chosen, on_progress=update))
            if dry_run or not plan.letters:
                render.render(plan.rows(), output, columns=dlq_discard.PLAN_COLUMNS)
                render.note("dlq discard: " + ("dry run, nothing was changed." if dry_run
                                               else "no dead letter left to discard."))
                return
            render.plan("dlq discard plan:", plan.rows(), dlq_discard.PLAN_COLUMNS)
            confirm("dlq discard", yes, "ledger")
            batch = dlq_discard.discard(ledger, plan)
        row = {"batch": batch, "group": plan.group, "discarded": len(plan.letters)}
        render.render([row], output, columns=("batch", "group", "discarded"))
        audit(where, "dlq discard", params(ctx), batch, outcome="applied", exit_code=0,
              plan=plan.rows(), result=[row])
