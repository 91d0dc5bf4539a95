"""Resending dead letters through the ledger: plan, send, resume; and discarding them.

How this works: `plan_resend` reads the group's dead letters matching the filters, leaves out
those the ledger records as resent or discarded (unless `again`), and for ``--to topic``
names the other groups subscribed to each original topic, which will receive the copies too.
`resend` opens a ledger batch (every row ``pending``, each with the unique key its copy will
carry), then a chunk at a time marks rows ``sending``, sends the copies concurrently, and
records ``sent`` (SEND_OK only) or ``failed``.  `resume` finishes a batch: ``pending`` rows
are sent; ``sending`` and ``failed`` rows are first looked up on the target by their unique
key (QUERY_MESSAGE) and sent only when absent, so nothing is delivered twice.  A copy keeps
body, keys, tags, flag and user properties; ``--to retry`` sends it to ``%RETRY%<group>`` with
RETRY_TOPIC = the original topic (only that group gets it, seeing the original topic), or for
a 5.x POP group to its POP retry topic ``%RETRY%<group>+<topic>`` (a POP consumer reads no
other; spelt V1 it cannot be sent to: `retry_targets`),
``--to topic`` to the original topic; reconsume times start at 0.  `ResendChange` and
`ResumeChange` are a resend and a resume as the change runner's `Change` (operations/change.py),
for `mqadmin dlq resend` and the dashboard alike; each opens the cluster's ledger for each
phase, so no database connection crosses a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError, QueryNotFoundError, TopicNotExistError
from engine.client.core.ids import uniq_ids
from engine.client.core.message import Message
from engine.client.core.results import SendStatus
from engine.client.produce.producer import Producer
from engine.protocol.message import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, ExitCode, TargetNotFound, UsageProblem
from mqadmin.history import who
from mqadmin.operations import change
from mqadmin.operations.dlq.ledger import (
    FAILED,
    PENDING,
    SENDING,
    SENT,
    Batch,
    Ledger,
    ledger_of,
    new_batch_id,
    now_iso,
)
from mqadmin.operations.dlq.model import BATCH_PROPERTY, LINK_PROPERTY, DeadLetter, Filters, Row
from mqadmin.operations.dlq.read import read_all
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import producer
from mqadmin.operations.targets import retry_targets, retry_topic, route_brokers

TARGETS = ("retry", "topic")
PLAN_COLUMNS = ("originTopic", "deadLetters", "target", "alsoReceivedBy")
FAILURE_COLUMNS = ("dlMsgId", "originTopic", "targetTopic", "state", "status")
OUTCOME_COLUMNS = ("batch", "total", "sent", "alreadyOnTarget", "failed")
CHUNK = 1024


@dataclass(frozen=True, slots=True)
class ResendPlan:
    group: str
    to: str
    letters: tuple[DeadLetter, ...]
    skipped: int  # already resent or discarded (left out without --again)
    other_groups: dict[str, tuple[str, ...]]  # original topic -> other subscribed groups
    filters: Filters
    #: ``--to retry``: original topic -> the group's retry topic for it (`retry_targets`).
    retry_topics: dict[str, str] = field(default_factory=dict)

    def retry_target(self, topic: str) -> str:
        return self.retry_topics.get(topic) or retry_topic(self.group)

    def target_topic(self, d: DeadLetter) -> str:
        return self.retry_target(d.origin_topic) if self.to == "retry" else d.origin_topic

    def rows(self) -> list[Row]:
        counts = Counter(d.origin_topic for d in self.letters)
        return [{"originTopic": t, "deadLetters": n,
                 "target": self.retry_target(t) if self.to == "retry" else t,
                 "alsoReceivedBy": ", ".join(self.other_groups.get(t, ())) or None}
                for t, n in sorted(counts.items())]


@dataclass(slots=True)
class ResendOutcome:
    batch: str
    total: int = 0
    sent: int = 0
    found: int = 0  # on the target already (a resumed send that had reached it)
    failed: list[Row] = field(default_factory=list)

    def row(self) -> Row:
        return {"batch": self.batch, "total": self.total, "sent": self.sent,
                "alreadyOnTarget": self.found, "failed": len(self.failed)}


async def _other_groups(admin: MQAdmin, group: str, topic: str) -> tuple[str, ...]:
    try:
        _, brokers = await route_brokers(admin, topic)
    except TopicNotExistError:
        return ()
    found: set[str] = set()
    for addr in brokers.values():
        try:
            found |= set((await admin.broker.topic_consumed_by(addr, topic)).group_list)
        except ClientError:
            continue
    return tuple(sorted(found - {group}))


async def plan_resend(admin: MQAdmin, ledger: Ledger, group: str, filters: Filters | None = None,
                      *, to: str = "retry", again: bool = False,
                      on_progress: Progress | None = None) -> ResendPlan:
    """What `resend` would send, to where, and who else receives it.

    Raises:
        UsageProblem: `to` is not retry or topic.
        TargetNotFound: the group has no dead-letter topic.
    """
    if to not in TARGETS:
        raise UsageProblem(f"--to {to!r}: use retry (only the group gets them again) or topic "
                           "(every group subscribed to the original topic gets them).")
    filters = filters or Filters()
    letters = await read_all(admin, group, filters, on_progress=on_progress)
    handled = set() if again else ledger.handled(group)
    chosen = tuple(d for d in letters if d.key not in handled)
    others: dict[str, tuple[str, ...]] = {}
    origins = sorted({d.origin_topic for d in chosen})
    if to == "topic":
        for topic in origins:
            others[topic] = await _other_groups(admin, group, topic)
    retries = await retry_targets(admin, group, origins) if to == "retry" else {}
    return ResendPlan(group, to, chosen, len(letters) - len(chosen), others, filters, retries)


def copy_of(d: DeadLetter, target_topic: str, uniq: str, batch: str, *,
            retry_of: str | None) -> Message:
    """The message a resend sends for dead letter `d`."""
    system = {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
    if d.origin_msg_id:
        system[PROPERTY_ORIGIN_MESSAGE_ID] = d.origin_msg_id
    if retry_of is not None:
        system[PROPERTY_RETRY_TOPIC] = retry_of
    props = {**d.user_properties(), LINK_PROPERTY: d.offset_msg_id, BATCH_PROPERTY: batch}
    return Message(target_topic, d.body, tags=d.tags, keys=d.keys, flag=d.flag,
                   properties=props, system_properties=system)


class _Pacer:
    """Holds sends to `rate` a second (None: as fast as they go)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.start: float | None = None  # the first send's time: a slow start is no credit
        self.count = 0

    def chunk(self) -> int:
        return CHUNK if not self.rate else max(1, min(CHUNK, int(self.rate / 10)))

    async def wait(self, n: int) -> None:
        if self.start is None:
            self.start = time.monotonic()
        if self.rate:
            delay = self.start + self.count / self.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        self.count += n


async def _send_chunk(p: Producer, batch: str, work: Sequence[tuple[Row, DeadLetter]],
                      outcome: ResendOutcome) -> list[Row]:
    """Send a chunk's copies concurrently (its rows are committed ``sending`` already); the
    outcomes to record."""

    async def one(row: Row, d: DeadLetter) -> Row:
        target = row["target_topic"]
        retry_of = d.origin_topic if target.startswith("%RETRY%") else None
        msg = copy_of(d, target, row["new_msg_id"], batch, retry_of=retry_of)
        try:
            sent = await p.send(msg)
        except (ClientError, TimeoutError, OSError) as exc:
            return {"id": row["id"], "state": FAILED, "status": f"{type(exc).__name__}: {exc}"}
        ok = sent.status is SendStatus.SEND_OK
        return {"id": row["id"], "state": SENT if ok else FAILED, "status": sent.status.name,
                "new_broker": sent.message_queue.broker_name,
                "new_queue_id": sent.message_queue.queue_id,
                "new_queue_offset": sent.queue_offset}

    results = await asyncio.gather(*(one(r, d) for r, d in work))
    for result, (row, d) in zip(results, work, strict=True):
        if result["state"] == SENT:
            outcome.sent += 1
        else:
            outcome.failed.append(_failure(row, d, result["status"]))
    return results


def _failure(row: Row, d: DeadLetter | None, status: str) -> Row:
    return {"dlMsgId": row["dl_msg_id"], "dlKey": row["dl_key"],
            "originTopic": row["origin_topic"], "targetTopic": row["target_topic"],
            "state": FAILED, "status": status, "deadLetterFound": d is not None}


async def _send(admin: MQAdmin, ledger: Ledger, batch: str,
                work: Sequence[tuple[Row, DeadLetter]], outcome: ResendOutcome,
                rate: float | None, on_progress: Progress | None) -> None:
    """Send chunk by chunk; one ledger transaction between chunks records the outcomes of
    the chunk sent and marks the next one ``sending`` before any of its sends."""
    pacer = _Pacer(rate)
    done = outcome.sent + outcome.found + len(outcome.failed)
    async with producer(admin, retries=0) as p:
        for topic in sorted({row["target_topic"] for row, _ in work}):
            with contextlib.suppress(ClientError):  # one route lookup, not one per send
                await p.publish_info(topic)
        results: list[Row] = []
        i = 0
        while i < len(work):
            part = work[i:i + pacer.chunk()]
            ledger.advance(results, [r["id"] for r, _ in part])  # before --rate's wait
            await pacer.wait(len(part))
            results = await _send_chunk(p, batch, part, outcome)
            i += len(part)
            if on_progress is not None:
                on_progress(done + i, outcome.total)
        ledger.record(results)


async def resend(admin: MQAdmin, ledger: Ledger, plan: ResendPlan, *, rate: float | None = None,
                 on_progress: Progress | None = None,
                 on_batch: Callable[[str], None] | None = None) -> ResendOutcome:
    """Send the plan's copies through a new ledger batch (`on_batch(batch_id)` is called once
    the batch is written, before any send)."""
    batch_id = new_batch_id()
    ids = uniq_ids()
    rows = [{"dl_key": d.key, "dl_msg_id": d.msg_id, "dl_offset_msg_id": d.offset_msg_id,
             "origin_topic": d.origin_topic, "target_topic": plan.target_topic(d),
             "new_msg_id": ids.next(), "state": PENDING} for d in plan.letters]
    batch = Batch(batch_id, ledger.scope, plan.group, "resend", plan.to,
                  plan.filters.describe(), who(), now_iso(), len(rows))
    ids_written = ledger.open_batch(batch, rows)
    if on_batch is not None:
        on_batch(batch_id)
    written = [{**r, "id": i} for r, i in zip(rows, ids_written, strict=True)]
    outcome = ResendOutcome(batch_id, total=len(written))
    await _send(admin, ledger, batch_id, list(zip(written, plan.letters, strict=True)),
                outcome, rate, on_progress)
    return outcome


async def _on_target(admin: MQAdmin, row: Row) -> dict[str, Any] | None:
    """Where the copy of a ledger row is stored, if the target has it (by unique key)."""
    topic = row["target_topic"]
    try:
        _, brokers = await route_brokers(admin, topic)
    except TopicNotExistError:
        return None
    for name, addr in brokers.items():
        try:
            found = await admin.broker.query_message_by_unique_key(addr, topic,
                                                                   row["new_msg_id"])
        except QueryNotFoundError:
            continue
        if found:
            r = found[0]
            return {"id": row["id"], "state": SENT, "status": "FOUND_ON_TARGET",
                    "new_broker": name, "new_queue_id": r.queue_id,
                    "new_queue_offset": r.queue_offset}
    return None


def resend_batch(ledger: Ledger, batch_id: str) -> Batch:
    """The resend batch `batch_id` of the ledger.

    Raises:
        TargetNotFound: no such batch in this cluster's ledger.
    """
    batch = ledger.batch(batch_id)
    if batch is None or batch.action != "resend":
        known = ", ".join(b.batch for b in ledger.batches(limit=5)) or "none"
        raise TargetNotFound(f"no resend batch {batch_id!r} in the ledger of this cluster "
                             f"(newest: {known}); see `mqadmin dlq status`.")
    return batch


async def resume(admin: MQAdmin, ledger: Ledger, batch_id: str, *, rate: float | None = None,
                 on_progress: Progress | None = None,
                 on_plan: Callable[[ResendOutcome, int], None] | None = None) -> ResendOutcome:
    """Finish a resend batch (see the module docstring); `on_plan(outcome, to_send)` is
    called once the unsure rows are settled, before any send.

    Raises:
        TargetNotFound: no such batch in this cluster's ledger.
    """
    batch = resend_batch(ledger, batch_id)
    open_rows = ledger.rows(batch_id, (PENDING, SENDING, FAILED))
    outcome = ResendOutcome(batch_id, total=batch.total)
    outcome.sent = batch.total - len(open_rows)
    unsure = [r for r in open_rows if r["state"] != PENDING]
    found = [f for f in await asyncio.gather(*(_on_target(admin, r) for r in unsure)) if f]
    ledger.record(found)
    outcome.found = len(found)
    done = {f["id"] for f in found}
    todo = [r for r in open_rows if r["id"] not in done]
    keys = frozenset(r["dl_key"] for r in todo)
    letters = {d.key: d for d in await read_all(admin, batch.group, Filters(ids=keys))} \
        if todo else {}
    work = [(r, letters[r["dl_key"]]) for r in todo if r["dl_key"] in letters]
    lost = [r for r in todo if r["dl_key"] not in letters]
    gone = "dead letter no longer in the DLQ (expired or deleted)"
    ledger.record([{"id": r["id"], "state": FAILED, "status": gone} for r in lost])
    outcome.failed += [_failure(r, None, gone) for r in lost]
    if on_plan is not None:
        on_plan(outcome, len(work))
    await _send(admin, ledger, batch_id, work, outcome, rate, on_progress)
    return outcome


# ---------------------------------------------------------------------------- the changes


class ResendIncomplete(CliError):
    """Some copies were not sent (SEND_OK): the ledger records each, ``--resume`` finishes
    the batch."""

    code = ExitCode.PARTIAL

    @classmethod
    def of(cls, outcome: ResendOutcome) -> ResendIncomplete:
        return cls(f"{len(outcome.failed)} of {outcome.total} dead letters were not resent "
                   f"(the ledger records each). See `mqadmin dlq status {outcome.batch}`, "
                   f"then finish with `mqadmin dlq resend --resume {outcome.batch}`.")


def _ended(outcome: ResendOutcome) -> change.Outcome:
    """A resend's (or resume's) outcome for the change runner: partial when a copy was not
    sent, with those copies as the details."""
    if not outcome.failed:
        return change.Outcome([outcome.row()], OUTCOME_COLUMNS, target=outcome.batch)
    return change.Outcome([outcome.row()], OUTCOME_COLUMNS, "partial",
                          ResendIncomplete.of(outcome), outcome.batch,
                          details=outcome.failed, detail_columns=FAILURE_COLUMNS)


class ResendChange:
    """dlq resend of the dead letters `filters` choose, to the group's retry topic or the
    original topics; `batch` is the ledger batch once written (before any send)."""

    def __init__(self, group: str, filters: Filters | None = None, *, to: str = "retry",
                 again: bool = False, rate: float | None = None,
                 args: dict[str, Any] | None = None) -> None:
        """`args`: what the audit log records (default: group, to and the ids chosen)."""
        self.group = group
        self.filters = filters or Filters()
        self.to = to
        self.again = again
        self.rate = rate
        ids = self.filters.ids
        self.args = args if args is not None else {
            "group": group, "to": to, "ids": sorted(ids) if ids is not None else "all"}
        self.batch: str | None = None

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: change.Progress) -> change.Planned[ResendPlan]:
        with ledger_of(where) as ledger:
            plan = await plan_resend(admin, ledger, self.group, self.filters, to=self.to,
                                     again=self.again, on_progress=progress.count)
        notes = [{"note": f"{plan.skipped} already resent or discarded are left out"}] \
            if plan.skipped else []
        others = sorted({g for gs in plan.other_groups.values() for g in gs})
        if others:
            notes.append({"note": f"groups {', '.join(others)} also receive the copies"})
        return change.Planned(plan, "dlq resend", self.group, self.args, plan.rows(),
                              PLAN_COLUMNS, notes, ("note",), noun="cluster",
                              nothing="" if plan.letters else "no dead letter to resend",
                              counted="sent")

    async def apply(self, admin: MQAdmin, where: Endpoint,
                    planned: change.Planned[ResendPlan],
                    progress: change.Progress) -> change.Outcome:
        def started(batch: str) -> None:
            self.batch = batch
            progress.step(f"batch {batch}: if interrupted, finish it with `mqadmin dlq resend "
                          f"--resume {batch}`")

        with ledger_of(where) as ledger:
            outcome = await resend(admin, ledger, planned.plan, rate=self.rate,
                                   on_progress=progress.count, on_batch=started)
        return _ended(outcome)


class ResumeChange:
    """dlq resend --resume: finish a batch (confirmed when it was started, so not asked
    again); nothing is sent twice (see the module docstring)."""

    def __init__(self, batch: str, *, rate: float | None = None,
                 args: dict[str, Any] | None = None) -> None:
        self.batch = batch
        self.rate = rate
        self.args = args if args is not None else {"resume": batch}

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: change.Progress) -> change.Planned[str]:
        """Raises: TargetNotFound (no such resend batch; nothing is recorded)."""
        with ledger_of(where) as ledger:
            resend_batch(ledger, self.batch)
        return change.Planned(self.batch, "dlq resend", self.batch, self.args, [],
                              OUTCOME_COLUMNS, noun="cluster", confirmed=True, counted="sent")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: change.Planned[str],
                    progress: change.Progress) -> change.Outcome:
        def settled(outcome: ResendOutcome, to_send: int) -> None:
            progress.step(f"resuming batch {outcome.batch}: {outcome.sent} sent before, "
                          f"{outcome.found} found on the target, {to_send} to send")

        with ledger_of(where) as ledger:
            outcome = await resume(admin, ledger, planned.plan, rate=self.rate,
                                   on_progress=progress.count, on_plan=settled)
        return _ended(outcome)
