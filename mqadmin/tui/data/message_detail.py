"""One message as its detail screen shows it: the body (text, JSON, hex), where it is
stored, whether each group consumed it and its trace as a timeline (timeline.py), the online
clients it can be handed to, its export.

How this works: everything reads through the message operations (messages/query.py, ids.py)
and returns values; nothing here draws.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import ConsumerNotOnlineError, TopicNotExistError
from engine.protocol.version import version_desc
from mqadmin.exit_codes import CliError
from mqadmin.operations.messages import query as message_ops
from mqadmin.operations.messages.ids import StoredMessage
from mqadmin.operations.messages.query import MessageDetail
from mqadmin.tui.data.timeline import Timeline, read_timeline

Row = dict[str, Any]
#: Bytes per line of the hex view.
HEX_WIDTH = 16


@dataclass(frozen=True, slots=True)
class Body:
    """A message body as the detail shows it: text, JSON pretty-printed when it parses
    (None otherwise), and a hex dump."""

    text: str
    json: str | None
    hex: str
    size: int


def body_of(raw: bytes) -> Body:
    text = raw.decode("utf-8", "replace")
    try:
        pretty: str | None = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = None
    return Body(text, pretty, hex_dump(raw), len(raw))


def hex_dump(raw: bytes) -> str:
    """Offset, hex bytes and printable characters, `HEX_WIDTH` bytes a line."""
    lines = []
    for at in range(0, len(raw), HEX_WIDTH):
        chunk = raw[at:at + HEX_WIDTH]
        digits = " ".join(f"{b:02x}" for b in chunk)
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {digits:<{HEX_WIDTH * 3 - 1}}  {shown}")
    return "\n".join(lines)


def where_stored(m: StoredMessage) -> list[tuple[str, str]]:
    """Where the message is kept: broker, queue, offsets, hosts and times."""
    row = message_ops.message_row(m, charset=None)
    return [(label, "" if row[k] is None else str(row[k])) for label, k in (
        ("topic", "topic"), ("broker", "brokerName"), ("queue", "queueId"),
        ("queue offset", "queueOffset"), ("commit-log offset", "commitLogOffset"),
        ("store host", "storeHost"), ("stored", "storeTime"), ("born host", "bornHost"),
        ("born", "bornTime"), ("message id", "msgId"), ("offset message id", "offsetMsgId"),
        ("tags", "tags"), ("keys", "keys"), ("reconsume times", "reconsumeTimes"))]


@dataclass(frozen=True, slots=True)
class MessageView:
    """What the message screen shows: the detail and the trace timeline, read together."""

    detail: MessageDetail
    timeline: Timeline


async def read_detail(admin: MQAdmin, found: StoredMessage) -> MessageView:
    """The message, for each group consuming its topic whether it consumed it, and its
    trace as a timeline."""
    detail, steps = await asyncio.gather(message_ops.detail(admin, found),
                                         read_timeline(admin, found.record))
    return MessageView(detail, steps)


@dataclass(frozen=True, slots=True)
class Client:
    """An online consumer a message can be handed to (consume directly)."""

    group: str
    client_id: str
    addr: str
    language: str
    version: str


async def online_clients(admin: MQAdmin, groups: list[str]) -> list[Client]:
    """The online clients of each group (groups with none are left out)."""
    async def one(group: str) -> list[Client]:
        try:
            cc = await admin.consumer_connections(group)
        except (ConsumerNotOnlineError, TopicNotExistError):
            return []
        return [Client(group, c.client_id, c.client_addr, c.language.name,
                       version_desc(c.version))
                for c in sorted(cc.connection_set, key=lambda c: c.client_id)]
    found = await asyncio.gather(*(one(g) for g in groups))
    return [c for cs in found for c in cs]


def export_record(m: StoredMessage) -> Row:
    """What export writes: every field and property, the body as text when it is UTF-8,
    else in base64 (``bodyBase64``)."""
    row = message_ops.message_row(m, charset=None)
    row.pop("tracks", None)
    raw = m.record.body
    try:
        row["body"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        row.pop("body", None)
        row["bodyBase64"] = base64.b64encode(raw).decode("ascii")
    return row


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path  # absolute
    replaced: bool  # a file of that name was there before


def export_message(m: StoredMessage, path: Path) -> Exported:
    """Write the message (export_record, as JSON) to `path` (relative: under the current
    directory).

    Raises:
        CliError: the file cannot be written.
    """
    target = path.expanduser().absolute()
    replaced = target.exists()
    try:
        target.write_text(json.dumps(export_record(m), indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {target}: {exc.strerror or exc}.") from None
    return Exported(target, replaced)
