"""`dlq export` and `dlq import`: dead letters as JSON Lines, one message per line.

How this works: a line holds every field of the dead letter, every property as stored, and
the body exactly: ``body`` is base64, ``bodyText`` the same bytes as text when they are
UTF-8.  Import checks every line before it sends anything, then, as a change for the
change runner (`ImportChange`: plan, confirm, apply, verify, audit), sends each message to
the topic given with its body, keys, tags, flag and user properties (system properties are
the broker's and the client's to set), so export followed by import reproduces them byte
for byte; each message sent is read back where the broker stored it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError, MessageValidationError
from engine.client.message import Message
from engine.client.results import SendResult, SendStatus
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, ExitCode, NotVerified, UsageProblem
from mqadmin.operations import change
from mqadmin.operations.dlq.model import SYSTEM_PROPERTIES, DeadLetter, Filters, Row
from mqadmin.operations.dlq.read import scan
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import producer, require_topic, stored_as_sent

IMPORT_CHUNK = 256
IMPORT_PLAN_COLUMNS = ("file", "topic", "messages", "bodyBytes")
IMPORT_COLUMNS = ("topic", "total", "sent", "failed", "verified")
#: The messages not sent, or sent and not read back: their line in the file, why.
IMPORT_FAILURE_COLUMNS = ("line", "msgId", "status")


def _doc(d: DeadLetter) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "group": d.group, "msgId": d.msg_id, "offsetMsgId": d.offset_msg_id,
        "brokerName": d.broker_name, "queueId": d.queue_id, "queueOffset": d.queue_offset,
        "originTopic": d.origin_topic, "originMsgId": d.origin_msg_id, "tags": d.tags,
        "keys": d.keys, "flag": d.flag, "reconsumeTimes": d.reconsume_times,
        "bornTimestamp": d.born_timestamp, "storeTimestamp": d.store_timestamp,
        "properties": d.properties, "body": base64.b64encode(d.body).decode("ascii")}
    with contextlib.suppress(UnicodeDecodeError):
        doc["bodyText"] = d.body.decode("utf-8")
    return doc


def to_json_lines(letters: Iterable[DeadLetter]) -> str:
    """The dead letters as JSON Lines (each line ends with a newline)."""
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    return b"".join(dumps(_doc(d), option=newline) for d in letters).decode("utf-8")


async def export(admin: MQAdmin, group: str, out: IO[str], filters: Filters | None = None, *,
                 on_progress: Progress | None = None) -> int:
    """Write the group's dead letters matching `filters` to `out`; how many.

    Raises:
        TargetNotFound: the group has no dead-letter topic.
    """
    count = 0
    async for chunk in scan(admin, group, filters, on_progress=on_progress):
        out.write(to_json_lines(chunk))
        count += len(chunk)
    return count


@dataclass(frozen=True, slots=True)
class Imported:
    """One line of an export, ready to send."""

    line: int
    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    flag: int
    properties: dict[str, str]
    msg_id: str | None

    def message(self, topic: str) -> Message:
        return Message(topic, self.body, tags=self.tags, keys=self.keys, flag=self.flag,
                       properties=self.properties)


def _parse(number: int, text: str) -> Imported:
    try:
        doc = orjson.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        body = base64.b64decode(doc["body"], validate=True)
        props = doc.get("properties") or {}
        keys = doc.get("keys") or []
        if not isinstance(props, dict) or not isinstance(keys, list):
            raise ValueError("properties must be an object and keys a list")
        user = {str(k): str(v) for k, v in props.items() if k not in SYSTEM_PROPERTIES}
        return Imported(number, body, doc.get("tags"), tuple(str(k) for k in keys),
                        int(doc.get("flag") or 0), user, doc.get("msgId"))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise UsageProblem(f"line {number} of the import file is not an exported dead letter "
                           f"({type(exc).__name__}: {exc}); nothing was sent. Fix or remove "
                           "the line and run the import again.") from None


def read_lines(lines: Iterable[str]) -> list[Imported]:
    """Every message of an export file, checked.

    Raises:
        UsageProblem: a line is not an exported dead letter (naming the line).
    """
    out = [_parse(i, line) for i, line in enumerate(lines, 1) if line.strip()]
    if not out:
        raise UsageProblem("the import file holds no message; nothing was sent.")
    return out


@dataclass(slots=True)
class ImportOutcome:
    total: int
    sent: int = 0
    failed: list[Row] = field(default_factory=list)
    #: Each message sent (SEND_OK) and the broker's answer, for reading it back.
    stored: list[tuple[Imported, SendResult]] = field(default_factory=list)


async def import_messages(admin: MQAdmin, messages: list[Imported], topic: str, *,
                          on_progress: Progress | None = None) -> ImportOutcome:
    """Send the messages to `topic`; SEND_OK counts as sent, anything else is a failure.

    Raises:
        TargetNotFound: no such topic.
    """
    await require_topic(admin, topic)
    outcome = ImportOutcome(len(messages))

    async def one(m: Imported, p: Any) -> None:
        try:
            sent = await p.send(m.message(topic))
        except (ClientError, MessageValidationError, TimeoutError) as exc:
            outcome.failed.append({"line": m.line, "msgId": m.msg_id, "status": str(exc)})
            return
        if sent.status is SendStatus.SEND_OK:
            outcome.sent += 1
            outcome.stored.append((m, sent))
        else:
            outcome.failed.append({"line": m.line, "msgId": m.msg_id,
                                   "status": sent.status.name})

    async with producer(admin) as p:
        for i in range(0, len(messages), IMPORT_CHUNK):
            await asyncio.gather(*(one(m, p) for m in messages[i:i + IMPORT_CHUNK]))
            if on_progress is not None:
                on_progress(min(i + IMPORT_CHUNK, len(messages)), len(messages))
    return outcome


async def unverified(admin: MQAdmin, outcome: ImportOutcome, topic: str) -> list[Row]:
    """The messages sent that cannot be read back where the broker stored them."""
    missing: list[Row] = []
    for i in range(0, len(outcome.stored), IMPORT_CHUNK):
        chunk = outcome.stored[i:i + IMPORT_CHUNK]
        found = await asyncio.gather(*(stored_as_sent(admin, s, topic) for _, s in chunk))
        missing += [{"line": m.line, "msgId": s.msg_id,
                     "status": f"sent, not readable at {s.offset_msg_id}"}
                    for (m, s), ok in zip(chunk, found, strict=True) if not ok]
    return missing


class ImportIncomplete(CliError):
    """Some messages of an import were not sent (SEND_OK)."""

    code = ExitCode.PARTIAL


@dataclass(frozen=True, slots=True)
class ImportPlan:
    source: str
    topic: str
    messages: tuple[Imported, ...]


class ImportChange:
    """dlq import: the checked lines of an export file sent to a topic, each read back."""

    def __init__(self, source: str, messages: list[Imported], topic: str,
                 args: dict[str, Any]) -> None:
        self.import_plan = ImportPlan(source, topic, tuple(messages))
        self.args = args

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: change.Progress) -> change.Planned[ImportPlan]:
        """Raises: as `require_topic` (no such topic, or not writable)."""
        plan = self.import_plan
        await require_topic(admin, plan.topic)
        row = {"file": plan.source, "topic": plan.topic, "messages": len(plan.messages),
               "bodyBytes": sum(len(m.body) for m in plan.messages)}
        return change.Planned(plan, "dlq import", plan.topic, self.args, [row],
                              IMPORT_PLAN_COLUMNS, noun="cluster", counted="sent")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: change.Planned[ImportPlan],
                    progress: change.Progress) -> change.Outcome:
        plan = planned.plan
        outcome = await import_messages(admin, list(plan.messages), plan.topic,
                                        on_progress=progress.count)
        missing = await unverified(admin, outcome, plan.topic)
        rows = [{"topic": plan.topic, "total": outcome.total, "sent": outcome.sent,
                 "failed": len(outcome.failed), "verified": outcome.sent - len(missing)}]
        details = outcome.failed + missing
        if outcome.failed:
            return change.Outcome(rows, IMPORT_COLUMNS, "partial", ImportIncomplete(
                f"{len(outcome.failed)} of {outcome.total} messages were not sent (their lines "
                f"are listed). Import those lines again into {plan.topic} once it takes "
                "writes."), details=details, detail_columns=IMPORT_FAILURE_COLUMNS)
        if missing:
            return change.Outcome(rows, IMPORT_COLUMNS, "unverified", NotVerified(
                f"{len(missing)} of {outcome.sent} messages were acknowledged but are not "
                f"readable where they were stored; look for them with `mqadmin queryMsgById "
                f"-i {missing[0]['msgId']} -t {plan.topic}`."), details=details,
                detail_columns=IMPORT_FAILURE_COLUMNS)
        return change.Outcome(rows, IMPORT_COLUMNS)


def read_file(path: Path) -> list[Imported]:
    """`read_lines` of a file.

    Raises:
        UsageProblem: the file cannot be read or a line is bad.
    """
    try:
        with path.open(encoding="utf-8") as f:
            return read_lines(f)
    except OSError as exc:
        raise UsageProblem(f"cannot read {path}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{path} is not UTF-8 text: is it a dlq export?") from None
