"""Dead letters as values: the message read from ``%DLQ%<group>``, filters, rows, previews.

How this works: a `DeadLetter` is one stored record of a group's dead-letter queue with what
triage needs (original topic from RETRY_TOPIC, original id from ORIGIN_MESSAGE_ID, reconsume
times, times) and its position (`key`: broker, queue, offset), which identifies it in the
ledger across fail-overs (the offset message id names the storing host, which changes when a
slave takes over).  `Filters` select dead letters the same way for show, export, resend and
discard.  A resent copy keeps body, keys, tags and every user property, and carries
`LINK_PROPERTY` (the dead letter's offset message id) and `BATCH_PROPERTY`, names that
Apache's `MessageConst` (4.9.7 and 5.x) does not reserve.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from engine.protocol.message import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageRecord,
)
from mqadmin.operations.sending import SYSTEM_PROPERTIES as BASE_SYSTEM_PROPERTIES
from mqadmin.operations.times import format_time

Row = dict[str, Any]

#: On a resent message: the offset message id of the dead letter it was made from.
LINK_PROPERTY = "REDRIVEN_FROM"
#: On a resent message: the ledger batch that sent it.
BATCH_PROPERTY = "REDRIVE_BATCH"

SYSTEM_PROPERTIES = BASE_SYSTEM_PROPERTIES | {LINK_PROPERTY, BATCH_PROPERTY}

PREVIEW_CHARS = 80


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One message of a group's dead-letter queue."""

    group: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str  # UNIQ_KEY, else the offset message id
    offset_msg_id: str
    origin_topic: str  # RETRY_TOPIC: the topic the group failed it from
    origin_msg_id: str | None  # ORIGIN_MESSAGE_ID
    tags: str | None
    keys: tuple[str, ...]
    reconsume_times: int
    born_timestamp: int
    store_timestamp: int
    properties: dict[str, str]
    body: bytes
    flag: int = 0

    @property
    def key(self) -> str:
        """Where it is stored: ``broker:queue:offset`` (the ledger's identity)."""
        return f"{self.broker_name}:{self.queue_id}:{self.queue_offset}"

    def user_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTIES}

    @classmethod
    def of(cls, record: MessageRecord, group: str, broker_name: str) -> DeadLetter:
        props = record.properties()
        keys = tuple(k for k in props.get("KEYS", "").split(" ") if k)
        offset_id = record.offset_msg_id
        return cls(group, broker_name, record.queue_id, record.queue_offset,
                   props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or offset_id,
                   offset_id, props.get(PROPERTY_RETRY_TOPIC) or record.topic,
                   props.get(PROPERTY_ORIGIN_MESSAGE_ID), props.get("TAGS"), keys,
                   record.reconsume_times, record.born_timestamp, record.store_timestamp,
                   props, bytes(record.body), record.flag)


@dataclass(frozen=True, slots=True)
class Filters:
    """Which dead letters of a group: all given conditions hold (store times in ms)."""

    topic: str | None = None  # the original topic
    key: str | None = None
    tag: str | None = None
    since: int | None = None
    until: int | None = None
    ids: frozenset[str] | None = None  # message ids, offset message ids or keys
    limit: int | None = None

    def matches(self, d: DeadLetter) -> bool:
        if self.topic is not None and d.origin_topic != self.topic:
            return False
        if self.key is not None and self.key not in d.keys:
            return False
        if self.tag is not None and d.tags != self.tag:
            return False
        if self.since is not None and d.store_timestamp < self.since:
            return False
        if self.until is not None and d.store_timestamp >= self.until:
            return False
        return self.ids is None or bool(self.ids.intersection(
            (d.msg_id, d.offset_msg_id, d.key)))

    def describe(self) -> str:
        parts = [f"{name}={value}" for name, value in (
            ("topic", self.topic), ("key", self.key), ("tag", self.tag),
            ("since", format_time(self.since)), ("until", format_time(self.until)),
            ("ids", len(self.ids) if self.ids is not None else None),
            ("limit", self.limit)) if value is not None]
        return ", ".join(parts) or "all"


def body_preview(body: bytes, limit: int | None = PREVIEW_CHARS) -> str:
    """JSON pretty-printed (one line when `limit`), UTF-8 text, or hex for binary."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        shown = body.hex(" ")
        return shown if limit is None or len(shown) <= limit else shown[:limit - 1] + "…"
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, indent=None if limit else 2)
    if limit is not None and len(text) > limit:
        return text[:limit - 1] + "…"
    return text


def age_text(ms: float) -> str:
    """A duration as ``3d 4h``, ``2h 5m``, ``4m 10s`` or ``12s``."""
    s = max(int(ms // 1000), 0)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def counts_by(values: Collection[str], top: int) -> str:
    """``a (3), b (1)``: the `top` most frequent values."""
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{v} ({n})" for v, n in ranked)
