"""Topic and group attributes (RocketMQ 5.x): the known attributes, the `+k=v,-k` text and
how a modification alters a current set, with Apache's refusals word for word.

How this works: a 5.x client sends attribute changes as one string, `+message.type=FIFO,
+queue.type=SimpleCQ,-reserve.time` (CREATE_TOPIC's `attributes` header, mqadmin's `-a`).
`parse_modification` turns it into a map keyed by the signed key (`{"+message.type": "FIFO",
"-reserve.time": ""}`), as Apache's `AttributeParser.parseToMap`; `alter` applies such a map
to the attributes a topic already has (`AttributeUtil.alterCurrentAttributes`): on creation
only `+` is allowed; afterwards `+` adds or updates and `-` deletes an existing key; an
attribute that is not changeable can only be given at creation.  Every refusal is an
`AttributeProblem` whose text is the message Apache's broker puts in its SYSTEM_ERROR remark
(`unsupported key: foo`, `value is not in set: [...]`, ...).  Sets are listed in the order a
Java `HashSet` prints them, so the remarks match a Java broker's.

    name             values                                                changeable default
    queue.type       SimpleCQ BatchCQ                                      no         SimpleCQ
    cleanup.policy   DELETE COMPACTION                                     no         DELETE
    message.type     UNSPECIFIED MIXED TRANSACTION FIFO DELAY NORMAL      yes        NORMAL
    reserve.time     -1 .. 2^63-1 (a long)                                 yes        -1

Subscription groups have attributes too in 5.3, but no attribute is defined for them
(`SubscriptionGroupAttributes.ALL` is empty), so every key is unsupported.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from engine.protocol.errors import AttributeProblem as AttributeProblem  # raised here
from engine.protocol.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TRANSACTION_PREPARED

ADD = "+"
DELETE = "-"
LONG_MAX = (1 << 63) - 1


class TopicMessageType(enum.StrEnum):
    """`message.type`: which kind of message a topic is for (5.x clients check it)."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class EnumAttribute:
    """An attribute whose value is one of a set (`EnumAttribute`)."""

    name: str
    changeable: bool
    #: The values in the order Java's HashSet prints them (the refusal lists them so).
    universe: tuple[str, ...]
    default: str

    def verify(self, value: str) -> None:
        if value not in self.universe:
            raise AttributeProblem(f"value is not in set: [{', '.join(self.universe)}]")


@dataclass(frozen=True, slots=True)
class LongRangeAttribute:
    """An attribute whose value is a Java long in [low, high] (`LongRangeAttribute`)."""

    name: str
    changeable: bool
    low: int
    high: int
    default: int

    def verify(self, value: str) -> None:
        number = java_parse_long(value)
        if number < self.low or number > self.high:
            raise AttributeProblem(f"value is not in range({self.low}, {self.high})")


Attribute = EnumAttribute | LongRangeAttribute

QUEUE_TYPE = EnumAttribute("queue.type", False, ("SimpleCQ", "BatchCQ"), "SimpleCQ")
CLEANUP_POLICY = EnumAttribute("cleanup.policy", False, ("DELETE", "COMPACTION"), "DELETE")
MESSAGE_TYPE = EnumAttribute(
    "message.type", True,
    ("UNSPECIFIED", "MIXED", "TRANSACTION", "FIFO", "DELAY", "NORMAL"), "NORMAL")
RESERVE_TIME = LongRangeAttribute("reserve.time", True, -1, LONG_MAX, -1)

#: `TopicAttributes.ALL`.
TOPIC_ATTRIBUTES: Mapping[str, Attribute] = {
    a.name: a for a in (QUEUE_TYPE, CLEANUP_POLICY, MESSAGE_TYPE, RESERVE_TIME)}
#: `SubscriptionGroupAttributes.ALL`: none in 5.3.
GROUP_ATTRIBUTES: Mapping[str, Attribute] = {}


def java_parse_long(text: str) -> int:
    """`Long.parseLong`: an optional sign and decimal digits, within a Java long.

    Raises:
        AttributeProblem: `For input string: "x"`, as Java's NumberFormatException says.
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise AttributeProblem(f'For input string: "{text}"')
    number = int(text)
    if not -LONG_MAX - 1 <= number <= LONG_MAX:
        raise AttributeProblem(f'For input string: "{text}"')
    return number


def _java_split(text: str, sep: str) -> list[str]:
    """`String.split(sep)`: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _index(parts: list[str], i: int) -> str:
    if i >= len(parts):
        raise AttributeProblem(f"Index {i} out of bounds for length {len(parts)}")
    return parts[i]


def parse_modification(text: str | None) -> dict[str, str]:
    """`+k1=v1,+k2=v2,-k3` as a map keyed by the signed key (`AttributeParser.parseToMap`).

    Raises:
        AttributeProblem: an item is neither `+key=value` nor `-key`, or a key repeats.
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in _java_split(text, ","):
        if "=" in item:
            pair = _java_split(item, "=")
            key, value = _index(pair, 0), _index(pair, 1)
            if ADD not in key:
                raise AttributeProblem(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = item, ""
            if DELETE not in key:
                raise AttributeProblem(f"delete attribute format is wrong: {key}")
        if key in out:
            raise AttributeProblem(f"key duplication: {key}")
        out[key] = value
    return out


def format_modification(modification: Mapping[str, str]) -> str:
    """The map back as text (`AttributeParser.parseToString`): `-k` when the value is empty."""
    return ",".join(key if not value else f"{key}={value}"
                    for key, value in modification.items())


def alter(current: Mapping[str, str], modification: Mapping[str, str], *, create: bool,
          known: Mapping[str, Attribute] = TOPIC_ATTRIBUTES) -> dict[str, str]:
    """The attributes after applying `modification` (signed keys) to `current`.

    Args:
        current: the attributes the topic (or group) has now; empty when it is new.
        modification: `parse_modification` output.
        create: the topic (or group) does not exist yet: only `+` is allowed, and
            attributes that are not changeable may be given.
        known: the attributes that exist (`TOPIC_ATTRIBUTES` or `GROUP_ATTRIBUTES`).

    Raises:
        AttributeProblem: as `AttributeUtil.alterCurrentAttributes` refuses.
    """
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in modification.items():
        real = key[1:]
        if not real or ADD in real or DELETE in real:
            raise AttributeProblem("kv string format wrong.")
        if real in seen:
            raise AttributeProblem(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith(ADD):
                raise AttributeProblem(
                    f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith(ADD):
            (update if real in current else add)[real] = value
        elif key.startswith(DELETE):
            if real not in current:
                raise AttributeProblem(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise AttributeProblem(f"wrong format key: {real}")
    _check(known, init, initial=True, deleting=False)
    _check(known, add, initial=False, deleting=False)
    _check(known, update, initial=False, deleting=False)
    _check(known, delete, initial=False, deleting=True)
    result = dict(current)
    result.update(init)
    result.update(add)
    result.update(update)
    for key in delete:
        result.pop(key, None)
    return result


def _check(known: Mapping[str, Attribute], changes: Mapping[str, str], *, initial: bool,
           deleting: bool) -> None:
    for key, value in changes.items():
        attribute = known.get(key)
        if attribute is None:
            raise AttributeProblem(f"unsupported key: {key}")
        if not initial and not attribute.changeable:
            raise AttributeProblem(f"attempt to update an unchangeable attribute. key: {key}")
        if not deleting:
            attribute.verify(value)


def message_type_of(attributes: Mapping[str, str]) -> TopicMessageType:
    """`TopicConfig.getTopicMessageType`: NORMAL when the topic has no `message.type`.

    Raises:
        ValueError: the stored value is not a message type (Apache's `valueOf` throws too).
    """
    value = attributes.get(MESSAGE_TYPE.name)
    return TopicMessageType.NORMAL if value is None else TopicMessageType(value)


#: Message properties that make a message DELAY (5.x timers besides the delay level), and
#: the FIFO one (`MessageConst`).
TIMER_PROPERTIES = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
SHARDING_KEY = "__SHARDINGKEY"


def message_type_of_message(properties: Mapping[str, str]) -> TopicMessageType:
    """The kind of one message (`TopicMessageType.parseFromMessageProperty`): TRANSACTION
    for a prepared message, DELAY for a delay level or a timer, FIFO for a message with a
    sharding key (a message group), else NORMAL.  The 5.x proxy compares it with the
    topic's `message_type`; the broker does not (Apache 5.3's only labels its metrics)."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if PROPERTY_DELAY_TIME_LEVEL in properties or any(p in properties
                                                      for p in TIMER_PROPERTIES):
        return TopicMessageType.DELAY
    if SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL
