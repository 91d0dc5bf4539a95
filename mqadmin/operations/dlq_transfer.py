"""`dlq export` and `dlq import`: dead letters as JSON Lines, one message per line.

How this works: a line holds every field of the dead letter, every property as stored, and
the body exactly: ``body`` is base64, ``bodyText`` the same bytes as text when they are
UTF-8.  Import checks every line before it sends anything, then sends each message to the
topic given with its body, keys, tags, flag and user properties (system properties are the
broker's and the client's to set), so export followed by import reproduces them byte for
byte.
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

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError, MessageValidationError
from engine.client.core.message import Message
from engine.client.core.results import SendStatus
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.dlq_model import SYSTEM_PROPERTIES, DeadLetter, Filters, Row
from mqadmin.operations.dlq_read import scan
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import producer, require_topic

IMPORT_CHUNK = 256


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
        else:
            outcome.failed.append({"line": m.line, "msgId": m.msg_id,
                                   "status": sent.status.name})

    async with producer(admin) as p:
        for i in range(0, len(messages), IMPORT_CHUNK):
            await asyncio.gather(*(one(m, p) for m in messages[i:i + IMPORT_CHUNK]))
            if on_progress is not None:
                on_progress(min(i + IMPORT_CHUNK, len(messages)), len(messages))
    return outcome


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
