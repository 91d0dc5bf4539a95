"""Custom headers of the 5.x POP requests and responses (5.3 field names and types).

How this works: as in `engine.protocol.header.broker`, a field without a default is a Java
`@CFNotNull` field and Java primitives default to their zero value.  The request headers
extend 5.3's `TopicQueueRequestHeader`, whose optional `bname` (broker name) ends them; its
other optional fields (namespace, oneway, logical queue) are not used by this engine and are
ignored when a client sends them.  The receipt these requests carry (`extraInfo`) and the
offset-info strings of a POP answer are `engine.protocol.receipt`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.message_queue import Topic
from engine.protocol.body.route import BrokerName
from engine.protocol.wire import Int32

#: POP_MESSAGE initMode: where a group without a committed offset starts (5.3
#: `ConsumeInitMode`).
INIT_MODE_MIN = 0
INIT_MODE_MAX = 1


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader:
    """POP_MESSAGE (200050): up to `max_msg_nums` messages, invisible for `invisible_time` ms.

    `queue_id` -1 pops from every readable queue of the topic; `poll_time` (ms) is how long
    the broker may hold the request when nothing is there; `order` asks for FIFO.
    """

    consumer_group: GroupName
    topic: Topic
    queue_id: Int32
    max_msg_nums: Int32
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: Int32
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class PopMessageResponseHeader:
    """A POP answer: when it popped, for how long, the revive queue of its checkpoint, and
    per queue the checkpoint's start offset, the messages' offsets and (FIFO) their counts."""

    pop_time: int
    invisible_time: int
    revive_qid: Int32
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader:
    """ACK_MESSAGE (200051): the message at `offset`, popped with receipt `extra_info`."""

    consumer_group: GroupName
    topic: Topic
    queue_id: Int32
    extra_info: str
    offset: int
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader:
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message stays invisible `invisible_time` ms
    from now (a 5.x client's nack or lease renewal)."""

    consumer_group: GroupName
    topic: Topic
    queue_id: Int32
    extra_info: str
    offset: int
    invisible_time: int
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader:
    """The new receipt's parts: the message's new pop time, invisibility and revive queue."""

    pop_time: int
    invisible_time: int
    revive_qid: Int32


@dataclass(frozen=True, slots=True)
class PeekMessageRequestHeader:
    """PEEK_MESSAGE (200052): read without popping (no checkpoint, no offset change)."""

    topic: Topic
    queue_id: Int32
    max_msg_nums: Int32
    consumer_group: GroupName
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class NotificationRequestHeader:
    """NOTIFICATION (200054): answer as soon as the group has a message to pop, or after
    `poll_time` ms."""

    consumer_group: GroupName
    topic: Topic
    queue_id: Int32
    poll_time: int
    born_time: int
    order: bool = False
    attempt_id: str | None = None
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class NotificationResponseHeader:
    has_msg: bool = False
    polling_full: bool = False


@dataclass(frozen=True, slots=True)
class PollingInfoRequestHeader:
    """POLLING_INFO (200055): how many POP requests the broker holds for a queue."""

    consumer_group: GroupName
    topic: Topic
    queue_id: Int32
    bname: BrokerName | None = None


@dataclass(frozen=True, slots=True)
class PollingInfoResponseHeader:
    polling_num: Int32
