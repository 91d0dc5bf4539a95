"""What a put of a timer message becomes, and what its delivery puts into the real queue.

How this works (Apache 5.3 `HookUtils.handleScheduleMessage` / `transformTimerMessage` and
`TimerMessageStore.convert`): a message with TIMER_DELIVER_MS, TIMER_DELAY_SEC or
TIMER_DELAY_MS (transaction type NOT or COMMIT, no DELAY level) due later than now is stored
in `rmq_sys_wheel_timer` queue 0 with TIMER_OUT_MS (its delivery time, rounded to the wheel's
precision: down, or one precision down on an exact multiple), REAL_TOPIC and REAL_QID.  One
due now or earlier is an ordinary message.  A delivery is the same record put into
REAL_TOPIC / REAL_QID with TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS added (REAL_TOPIC and
REAL_QID stay in its properties, as in what 5.3 stores).

`identity()` names a delivery independently of where it was stored, so that recovery can
recognise the deliveries already in the commit log (docs/timers.md, "Exactly once").
"""

from __future__ import annotations

import re

from engine.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
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
from engine.store.record_scan import TIMER_TOPIC
from engine.store.results import PutMessageStatus

TIMER_MARK = "TIMER_"  # every timer property starts so: the cheap test on the put path
TIMER_KEYS = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
_JAVA_LONG = re.compile(r"[+-]?[0-9]{1,19}")
PRECISIONS = (100, 200, 500, 1000)

Identity = tuple[str, int, int, int, str, str]
"""(topic, queue id, born timestamp, body CRC, TIMER_OUT_MS, UNIQ_KEY) of a delivery."""


def effective_precision(configured: int) -> int:
    """`MessageStoreConfig.setTimerPrecisionMs`: the largest of 100/200/500/1000 ms not above
    the configured value (100 below it)."""
    chosen = PRECISIONS[0]
    for p in PRECISIONS:
        if configured >= p:
            chosen = p
    return chosen


def _parse_long(text: str) -> int:
    if not _JAVA_LONG.fullmatch(text):
        raise ValueError(text)
    return int(text)


def to_timer(msg: BrokerMessage, now: int, precision_ms: int, max_delay_sec: int,
             enabled: bool) -> BrokerMessage | PutMessageStatus:
    """The message to store for `msg` (itself when it is not a timer), or the refusal.

    Returns:
        WHEEL_TIMER_NOT_ENABLE when timers are off, WHEEL_TIMER_MSG_ILLEGAL for a value that is
        not a number, a delay beyond `max_delay_sec`, or a past TIMER_DEL_UNIQKEY.
    """
    if msg.sysflag & TRANSACTION_TYPE_MASK not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return msg
    if msg.topic == TIMER_TOPIC:
        return msg
    text = msg.properties
    if (property_value(text, PROPERTY_TIMER_OUT_MS) is not None
            and property_value(text, PROPERTY_DELAY_TIME_LEVEL) is None):
        return msg  # a delivery (the common case here): not timed again, as below
    props = string_to_properties(text)
    if not any(k in props for k in TIMER_KEYS):
        return msg
    level = props.get(PROPERTY_DELAY_TIME_LEVEL, "")
    if level.isdigit() and int(level) > 0:  # a delay level wins: the timer keys are dropped
        for key in TIMER_KEYS:
            props.pop(key, None)
        return msg._replace(properties=properties_to_string(props))
    if PROPERTY_TIMER_OUT_MS in props:  # already delivered once: an ordinary message now
        return msg
    if not enabled:
        return PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            deliver = now + _parse_long(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        elif PROPERTY_TIMER_DELAY_MS in props:
            deliver = now + _parse_long(props[PROPERTY_TIMER_DELAY_MS])
        else:
            deliver = _parse_long(props[PROPERTY_TIMER_DELIVER_MS])
    except ValueError:
        return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    if deliver <= now:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        return msg  # due already: delivered at once, as an ordinary message
    if deliver - now > max_delay_sec * 1000:
        return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    if deliver % precision_ms == 0:
        deliver -= precision_ms
    else:
        deliver = deliver // precision_ms * precision_ms
    props[PROPERTY_TIMER_OUT_MS] = str(deliver)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return msg._replace(topic=TIMER_TOPIC, queue_id=0, properties=properties_to_string(props))


def asked_time(record: MessageRecord, precision_ms: int) -> int:
    """When the parked record asked to be delivered: TIMER_DELIVER_MS, or its store time plus
    TIMER_DELAY_SEC / TIMER_DELAY_MS, kept within its slot (TIMER_OUT_MS, TIMER_OUT_MS +
    precision]; the slot's end when it cannot be read."""
    text = record.properties_raw.decode()
    try:
        out_ms = _parse_long(property_value(text, PROPERTY_TIMER_OUT_MS) or "")
    except ValueError:
        return record.store_timestamp  # not a parked timer: now
    try:
        value = property_value(text, PROPERTY_TIMER_DELAY_SEC)
        if value is not None:
            at = record.store_timestamp + _parse_long(value) * 1000
        else:
            value = property_value(text, PROPERTY_TIMER_DELAY_MS)
            if value is not None:
                at = record.store_timestamp + _parse_long(value)
            else:
                at = _parse_long(property_value(text, PROPERTY_TIMER_DELIVER_MS) or "")
    except ValueError:
        return out_ms + precision_ms
    return min(max(at, out_ms + 1), out_ms + precision_ms)


_REPLACED = (PROPERTY_TIMER_ENQUEUE_MS + NAME_VALUE_SEPARATOR,
             PROPERTY_TIMER_DEQUEUE_MS + NAME_VALUE_SEPARATOR)


def delivery(record: MessageRecord, enqueue_ms: int, now: int) -> BrokerMessage | None:
    """The message a due timer puts into its real queue; None when REAL_TOPIC is missing.

    Its properties are the parked record's, REAL_TOPIC and REAL_QID included, with
    TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS set: what 5.3 stores (its `convertMessage` writes
    the properties string before it clears REAL_TOPIC / REAL_QID from the map).  Works on the
    raw string: this runs once per delivered timer."""
    text = record.properties_raw.decode()
    topic = property_value(text, PROPERTY_REAL_TOPIC)
    queue = property_value(text, PROPERTY_REAL_QUEUE_ID) or ""
    if not topic or not queue.lstrip("-").isdigit():
        return None
    kept = [e for e in text.split(PROPERTY_SEPARATOR) if e and not e.startswith(_REPLACED)]
    kept.append(f"{PROPERTY_TIMER_ENQUEUE_MS}{NAME_VALUE_SEPARATOR}{enqueue_ms}")
    kept.append(f"{PROPERTY_TIMER_DEQUEUE_MS}{NAME_VALUE_SEPARATOR}{now}")
    return message_from_record(record, topic=topic, queue_id=int(queue),
                               properties=PROPERTY_SEPARATOR.join(kept))


def build_delete_key(real_topic: str, unique_key: str) -> str:
    """5.3 `TimerMessageStore.buildDeleteKey`: what a delete marker names a timer by."""
    return f"{real_topic}+{unique_key}"


def delete_key(record: MessageRecord) -> str | None:
    """The TIMER_DEL_UNIQKEY of a parked delete marker (None: an ordinary timer)."""
    if b"TIMER_DEL_UNIQKEY\x01" not in record.properties_raw:
        return None
    return property_value(record.properties_raw.decode(), PROPERTY_TIMER_DEL_UNIQKEY)


def target_key(record: MessageRecord) -> str:
    """The key a delete marker names this parked timer by (REAL_TOPIC+UNIQ_KEY)."""
    text = record.properties_raw.decode()
    return build_delete_key(property_value(text, PROPERTY_REAL_TOPIC) or "",
                            property_value(text, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "")


def timer_identity(record: MessageRecord) -> Identity | None:
    """The identity its delivery will have, of a record parked in the timer topic."""
    props = record.properties()
    topic = props.get(PROPERTY_REAL_TOPIC)
    queue = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not queue.lstrip("-").isdigit():
        return None
    return (topic, int(queue), record.born_timestamp, record.body_crc,
            props.get(PROPERTY_TIMER_OUT_MS, ""),
            props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))


def delivered_identity(record: MessageRecord) -> Identity | None:
    """The identity of a record that is a timer delivery (TIMER_DEQUEUE_MS set, not parked)."""
    if record.topic == TIMER_TOPIC or b"TIMER_DEQUEUE_MS\x01" not in record.properties_raw:
        return None
    props = record.properties()
    return (record.topic, record.queue_id, record.born_timestamp, record.body_crc,
            props.get(PROPERTY_TIMER_OUT_MS, ""),
            props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))
