"""The POP receipt (`extraInfo`) and the offset-info strings of a POP answer (5.3 ExtraInfoUtil).

How this works: a popped message is acknowledged with its receipt, a space-separated text

    ckQueueOffset popTime invisibleTime reviveQid retryMark brokerName queueId [msgQueueOffset]

where `ckQueueOffset` is the start offset of the checkpoint that covers the message, `reviveQid`
the revive queue that checkpoint lives in (999 for FIFO pops, which keep no checkpoint), and
`retryMark` says which topic the message was popped from: "0" the topic itself, "1" the
group's pop retry topic `%RETRY%<group>_<topic>`, "2" the V2 spelling `%RETRY%<group>+<topic>`.
The broker answers a POP with three per-queue strings, entries joined by ";", each
"retryMark queueId value": `startOffsetInfo` (the checkpoint's start offset), `msgOffsetInfo`
(the popped offsets, joined by ",") and `orderCountInfo` (FIFO: how often each was popped;
5.3 also keys it per message as "qo<queueId>%<offset>").  The client joins them into each
message's receipt (its POP_CK property).  Everything here is text in and text out; a malformed
receipt raises `ReceiptError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from engine.protocol.errors import ProtocolError
from engine.protocol.header.pop import PopMessageResponseHeader
from engine.protocol.message import KEY_SEPARATOR, RETRY_GROUP_TOPIC_PREFIX

NORMAL_TOPIC: Final = "0"
RETRY_TOPIC: Final = "1"
RETRY_TOPIC_V2: Final = "2"
_MARKS = (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2)
#: The reviveQid of a FIFO pop's receipt: FIFO keeps order info, not a checkpoint.
POP_ORDER_REVIVE_QUEUE: Final = 999
_SEP_V1 = "_"
_SEP_V2 = "+"
_QUEUE_OFFSET = "qo"


class ReceiptError(ProtocolError):
    """A receipt or offset-info string that does not parse."""


# ---------------------------------------------------------------------------- pop retry topics


def pop_retry_topic(topic: str, group: str, *, v2: bool = False) -> str:
    """The group's pop retry topic for `topic` (5.3 `KeyBuilder.buildPopRetryTopic`)."""
    return RETRY_GROUP_TOPIC_PREFIX + group + (_SEP_V2 if v2 else _SEP_V1) + topic


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and _SEP_V2 in topic


def retry_mark(topic: str) -> str:
    """"0" for a normal topic, "1" for a retry topic, "2" for a V2 pop retry topic."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic a receipt's message was popped from: `topic` or the group's retry topic."""
    if mark == NORMAL_TOPIC:
        return topic
    if mark == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if mark == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    raise ReceiptError(f"unknown retry mark {mark!r} (0, 1 or 2)")


def normal_topic(topic: str, group: str) -> str:
    """The topic a pop retry topic of `group` retries (any other topic is itself)."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    for sep in (_SEP_V2, _SEP_V1):
        head = RETRY_GROUP_TOPIC_PREFIX + group + sep
        if topic.startswith(head):
            return topic[len(head):]
    return topic


# ---------------------------------------------------------------------------- the receipt


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """One popped message's receipt, as 5.3's ExtraInfoUtil writes and reads it."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    #: The message's own queue offset (receipts built by a client always carry it).
    queue_offset: int | None = None

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def revive_time(self) -> int:
        """When the message becomes visible again."""
        return self.pop_time + self.invisible_time

    def topic(self, topic: str, group: str) -> str:
        """The topic the message was popped from (`topic` is the one the client names)."""
        return real_topic(topic, group, self.retry)

    def encode(self) -> str:
        parts = [str(self.ck_queue_offset), str(self.pop_time), str(self.invisible_time),
                 str(self.revive_qid), self.retry, self.broker_name, str(self.queue_id)]
        if self.queue_offset is not None:
            parts.append(str(self.queue_offset))
        return KEY_SEPARATOR.join(parts)

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        """Raises ReceiptError: fewer than seven fields, a number that is not one, a bad mark."""
        parts = text.split(KEY_SEPARATOR)
        if len(parts) < 7:
            raise ReceiptError(f"receipt {text[:120]!r} has {len(parts)} fields, expected 7 or 8")
        if parts[4] not in _MARKS:
            raise ReceiptError(f"receipt {text[:120]!r}: unknown retry mark {parts[4]!r}")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4],
                       parts[5], int(parts[6]), int(parts[7]) if len(parts) > 7 else None)
        except ValueError:
            raise ReceiptError(f"receipt {text[:120]!r} has a field that is not a number") \
                from None


def build_extra_info(ck_queue_offset: int, pop_time: int, invisible_time: int,
                     revive_qid: int, topic: str, broker_name: str, queue_id: int,
                     queue_offset: int | None = None) -> str:
    """A receipt for a message popped from `topic` (its retry mark is derived from the name)."""
    return ExtraInfo(ck_queue_offset, pop_time, invisible_time, revive_qid, retry_mark(topic),
                     broker_name, queue_id, queue_offset).encode()


# ---------------------------------------------------------------------------- offset infos


def queue_key(topic: str, queue_id: int) -> str:
    """The key of a queue in the parsed offset infos: "retryMark@queueId"."""
    return f"{retry_mark(topic)}@{queue_id}"


def queue_offset_key(topic: str, queue_id: int, queue_offset: int) -> str:
    """The key of one message in a parsed orderCountInfo: "retryMark@qo<queueId>%<offset>"."""
    return f"{retry_mark(topic)}@{_QUEUE_OFFSET}{queue_id}%{queue_offset}"


def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_mark(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: list[int]) -> str:
    return (f"{retry_mark(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}"
            + ",".join(map(str, offsets)))


def order_count_entry(topic: str, queue_id: int, count: int) -> str:
    """A queue's FIFO pop count (the whole batch)."""
    return f"{retry_mark(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{count}"


def order_count_offset_entry(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    """One message's FIFO pop count."""
    return (f"{retry_mark(topic)}{KEY_SEPARATOR}{_QUEUE_OFFSET}{queue_id}%{queue_offset}"
            f"{KEY_SEPARATOR}{count}")


def join_entries(entries: list[str]) -> str:
    return ";".join(entries)


def _entries(name: str, text: str | None) -> list[tuple[str, str]]:
    """(key, value) of each entry; a key seen twice or an entry not in three parts raises."""
    if not text:
        return []
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for one in text.split(";"):
        parts = one.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise ReceiptError(f"{name} entry {one[:80]!r} is not 'mark queue value'")
        key = f"{parts[0]}@{parts[1]}"
        if key in seen:
            raise ReceiptError(f"{name} names {key} twice")
        seen.add(key)
        out.append((key, parts[2]))
    return out


def _number(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ReceiptError(f"{name}: {raw[:40]!r} is not a number") from None


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    return {k: _number("startOffsetInfo", v) for k, v in _entries("startOffsetInfo", text)}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    return {k: [_number("msgOffsetInfo", o) for o in v.split(",")]
            for k, v in _entries("msgOffsetInfo", text)}


def parse_order_count_info(text: str | None) -> dict[str, int]:
    return {k: _number("orderCountInfo", v) for k, v in _entries("orderCountInfo", text)}


@dataclass(frozen=True, slots=True)
class Popped:
    """One popped message's receipt, and (FIFO) how often its queue or it was popped."""

    receipt: ExtraInfo
    pop_count: int | None = None


def popped(header: PopMessageResponseHeader, broker_name: str,
           messages: Iterable[tuple[str, int, int, str | None]], *,
           order: bool) -> list[Popped]:
    """The receipts of a POP answer's messages, given as (stored topic, queue id, queue
    offset, the POP_CK property it came with) in answer order, as 5.3's
    `processPopResponse` builds them: a message that came with its receipt (a retry message
    the broker re-encoded under the topic asked for) keeps it; for the others the
    checkpoint is the queue's start offset and the offset the queue's next entry of
    msgOffsetInfo (the message's own where it leaves it out; a queue without a start
    offset makes each message its own checkpoint).  Raises ReceiptError for an offset info
    or a receipt that does not parse."""
    starts = parse_start_offset_info(header.start_offset_info)
    offsets = parse_msg_offset_info(header.msg_offset_info)
    counts = parse_order_count_info(header.order_count_info) if order else {}
    seen: dict[str, int] = {}
    out: list[Popped] = []
    for topic, queue_id, queue_offset, given in messages:
        if given is not None:
            info = ExtraInfo.parse(given)
            count = counts.get(f"{info.retry}@{_QUEUE_OFFSET}{info.queue_id}%"
                               f"{info.queue_offset}", counts.get(f"{info.retry}@{queue_id}"))
            out.append(Popped(info, count))
            continue
        key = queue_key(topic, queue_id)
        index = seen.get(key, 0)
        seen[key] = index + 1
        ck = starts.get(key, queue_offset)
        listed = offsets.get(key, ())
        offset = listed[index] if index < len(listed) else queue_offset
        count = counts.get(queue_offset_key(topic, queue_id, queue_offset), counts.get(key))
        out.append(Popped(ExtraInfo(ck, header.pop_time, header.invisible_time,
                                    header.revive_qid, retry_mark(topic), broker_name,
                                    queue_id, offset), count))
    return out
