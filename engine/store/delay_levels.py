"""Delay levels, store part: parking a DELAY message in SCHEDULE_TOPIC_XXXX, restoring it.

How this works (store-format.md §9.3, message-format.md §10): a put whose `DELAY` property
is a level > 0 (and whose transaction type is NOT or COMMIT) is stored in
SCHEDULE_TOPIC_XXXX, queue `level - 1`, with `REAL_TOPIC` / `REAL_QID` remembering where it
was going; its consume-queue tags code is the delivery time (store time + the level's
delay).  The broker part, `engine.broker.delay_levels`, later puts `restore()`'s copy into
the real queue: same body, flag, sysflag, hosts, born time and reconsume times, and the
parked properties unchanged, `DELAY`, `REAL_TOPIC` and `REAL_QID` included (so a consumer
still reads the message's delay level), as Apache 4.9.8's and 5.3.3's `messageTimeup` store
it: they write the properties string before they clear the level from the message's map.
That copy must not be parked again: the store's `append_due` puts it as it is.

Delay levels are one of delayed delivery's two mechanisms; timer messages (`TIMER_*`, 5.x)
are the other, parked by `engine.store.timer` and delivered by `engine.broker.timer`
(docs/timers.md, "Where each part is").
"""

from __future__ import annotations

from engine.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    BrokerMessage,
    MessageRecord,
    message_from_record,
    properties_to_string,
    property_value,
    string_to_properties,
)
from engine.store.errors import StoreConfigError
from engine.store.record_scan import SCHEDULE_TOPIC

_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_KEY = PROPERTY_DELAY_TIME_LEVEL + "\x01"


def parse_delay_levels(text: str) -> dict[int, int]:
    """`messageDelayLevel` ("1s 5s 10s ...") -> {level: delay ms}, levels from 1.

    Raises:
        StoreConfigError: a token is not a number followed by s, m, h or d.
    """
    table: dict[int, int] = {}
    for level, token in enumerate(text.split(), start=1):
        unit = _UNITS.get(token[-1:])
        if unit is None or not token[:-1].isdigit():
            raise StoreConfigError(
                f"messageDelayLevel: bad level {level} {token!r}; expected a number followed "
                "by s, m, h or d, e.g. \"1s 5s 10s 30s 1m\"")
        table[level] = int(token[:-1]) * unit
    if not table:
        raise StoreConfigError("messageDelayLevel is empty; expected e.g. \"1s 5s 10s 30s 1m\"")
    return table


def delay_level(properties: str) -> int:
    """The message's DELAY level, 0 when absent or not a number."""
    if _DELAY_KEY not in properties:
        return 0
    value = property_value(properties, PROPERTY_DELAY_TIME_LEVEL)
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def schedule(msg: BrokerMessage, max_level: int) -> BrokerMessage:
    """The copy of a DELAY message to store instead, or `msg` itself when it is not delayed."""
    level = delay_level(msg.properties)
    if level <= 0 or msg.topic == SCHEDULE_TOPIC:
        return msg
    if msg.sysflag & TRANSACTION_TYPE_MASK not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return msg
    props = string_to_properties(msg.properties)
    level = min(level, max_level)
    props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return msg._replace(topic=SCHEDULE_TOPIC, queue_id=level - 1,
                        properties=properties_to_string(props))


def restore(record: MessageRecord) -> BrokerMessage | None:
    """The message to put into its real queue once due; None when REAL_TOPIC is missing."""
    props = record.properties()
    topic = props.get(PROPERTY_REAL_TOPIC)
    queue = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not queue.lstrip("-").isdigit():
        return None
    return message_from_record(record, topic=topic, queue_id=int(queue),
                               properties=record.properties_raw.decode())
