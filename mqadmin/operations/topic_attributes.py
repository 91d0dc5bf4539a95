"""Topic attributes in mqadmin (RocketMQ 5's `message.type`, ...): the `-a` text, how a
topic's attributes are shown, `topicConfig` (each broker's config of a topic) and the
message types `topicList --attributes` adds.

How this works: attributes live in each broker's topic config (GET_ALL_TOPIC_CONFIG,
GET_TOPIC_CONFIG 351); the name servers' routes carry none.  A RocketMQ 4.x broker keeps
none and does not know GET_TOPIC_CONFIG (it answers REQUEST_CODE_NOT_SUPPORTED), which is how
a change that needs attributes finds out before changing anything there.  A topic without a
`message.type` is NORMAL to RocketMQ 5 clients (Apache's `getTopicMessageType`); the rows
show what the broker stores, so such a topic's messageType is empty.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import (
    NotFoundError,
    RequestCodeNotSupportedError,
    TopicNotExistError,
)
from engine.client.namesrv import ServerOutcome
from engine.protocol import attributes as attrs
from engine.protocol.body.topic import TopicConfig
from engine.protocol.perm import perm_to_string
from mqadmin.exit_codes import Forbidden, UsageProblem
from mqadmin.operations.mutation import Gathered, failures_of
from mqadmin.operations.targets import masters, route_brokers

Row = dict[str, Any]

ATTRIBUTE_COLUMNS = ("messageType", "attributes")
CONFIG_COLUMNS = ("topic", "brokerName", "addr", "readQueueNums", "writeQueueNums", "perm",
                  "topicSysFlag", "messageType", "attributes")
#: The message types a topic is created with (MIXED and UNSPECIFIED are Apache's too, but
#: MIXED is refused unless the broker allows it, and UNSPECIFIED means "not checked").
MESSAGE_TYPES = (attrs.TopicMessageType.NORMAL, attrs.TopicMessageType.FIFO,
                 attrs.TopicMessageType.DELAY, attrs.TopicMessageType.TRANSACTION)
ATTRIBUTE_HELP = ("+key=value adds or changes, -key deletes, comma-separated: "
                  "+message.type=FIFO (NORMAL, FIFO, DELAY, TRANSACTION; changeable), "
                  "+queue.type=SimpleCQ and +cleanup.policy=DELETE (only when creating)")


def parse_attributes(text: str | None) -> dict[str, str]:
    """`-a` as Apache's mqadmin parses it (signed keys), refused here before any call.

    Raises:
        UsageProblem: not `+key=value` / `-key` items, or a key given twice.
    """
    if text is None or not text.strip():
        return {}
    try:
        return attrs.parse_modification(text.strip())
    except attrs.AttributeProblem as exc:
        raise UsageProblem(f"invalid -a {text.strip()!r}: {exc}. Use {ATTRIBUTE_HELP}."
                           ) from None


def show_attributes(attributes: Mapping[str, str] | None) -> str:
    """`message.type=FIFO,queue.type=SimpleCQ` (sorted), empty when there are none."""
    return ",".join(f"{k}={v}" for k, v in sorted((attributes or {}).items()))


def expected_attributes(current: TopicConfig | None, modification: Mapping[str, str]
                        ) -> dict[str, str] | None:
    """What a 5.x broker will keep after `modification`, or None when it will refuse it."""
    try:
        return attrs.alter(current.attribute_map if current else {}, modification,
                           create=current is None)
    except attrs.AttributeProblem:
        return None


async def refuse_without_attributes(addr: str, probe: Awaitable[object], what: str) -> None:
    """Raises `Forbidden` before a change that needs 5.x settings reaches a 4.x broker.

    Args:
        addr: the broker.
        probe: a 5.x read of the very topic or group to change (GET_TOPIC_CONFIG or
            GET_SUBSCRIPTIONGROUP_CONFIG, so access control asks for no other resource):
            a 4.x broker answers it REQUEST_CODE_NOT_SUPPORTED; "not found" is a 5.x answer.
        what: what the broker would drop, for the message.

    Raises:
        Forbidden: the broker is RocketMQ 4.x.
    """
    try:
        await probe
    except RequestCodeNotSupportedError:
        raise Forbidden(f"broker {addr} is RocketMQ 4.x: it keeps no {what}; nothing was "
                        f"changed there. Leave the option out for 4.x brokers, or upgrade."
                        ) from None
    except NotFoundError:
        pass


def message_type_cell(config: TopicConfig | None) -> str | None:
    """The stored `message.type` (None when the topic has none)."""
    return (config.attributes or {}).get(attrs.MESSAGE_TYPE.name) if config else None


async def topic_config(admin: MQAdmin, topic: str) -> Gathered:
    """topicConfig: each broker's config of `topic` (one address per broker name of its
    route), attributes included; a 4.x broker's row has them empty.

    Raises:
        TopicNotExistError: no route.
    """
    _, brokers = await route_brokers(admin, topic)

    async def read(addr: str) -> TopicConfig | None:
        try:
            return await admin.broker.topic_config(addr, topic)
        except RequestCodeNotSupportedError:  # 4.x: no attributes, the table has the rest
            table = await admin.broker.all_topic_config(addr)
            return table.topic_config_table.get(topic)
        except TopicNotExistError:
            return None

    outcomes = await admin.on_brokers(list(brokers.values()), read)
    names = {addr: name for name, addr in brokers.items()}
    rows = [config_row(topic, names[o.addr], o.addr, o.value)
            for o in outcomes if o.error is None]
    return Gathered(rows, failures_of(outcomes), len(outcomes), noun="brokers")


def config_row(topic: str, broker_name: str, addr: str, config: TopicConfig | None) -> Row:
    return {"topic": topic, "brokerName": broker_name, "addr": addr,
            "readQueueNums": config.read_queue_nums if config else None,
            "writeQueueNums": config.write_queue_nums if config else None,
            "perm": perm_to_string(config.perm) if config else None,
            "topicSysFlag": config.topic_sys_flag if config else None,
            "messageType": message_type_cell(config),
            "attributes": show_attributes(config.attributes) if config else None}


async def topic_tables(admin: MQAdmin, addrs: Sequence[str]
                       ) -> list[ServerOutcome[dict[str, TopicConfig]]]:
    """Every topic's config on each broker at `addrs` (one GET_ALL_TOPIC_CONFIG each), in
    the order of `addrs`."""
    async def table(addr: str) -> dict[str, TopicConfig]:
        return dict((await admin.broker.all_topic_config(addr)).topic_config_table)

    return await admin.on_brokers(addrs, table)


async def attribute_index(admin: MQAdmin) -> dict[str, Row]:
    """Topic -> its messageType and attributes cells, from one GET_ALL_TOPIC_CONFIG per
    master broker; when brokers disagree the cell lists each value, `/`-separated."""
    outcomes = await topic_tables(admin, list((await masters(admin)).values()))
    found: dict[str, tuple[set[str], set[str]]] = {}
    for outcome in outcomes:
        for name, config in (outcome.value or {}).items():
            types, texts = found.setdefault(name, (set(), set()))
            types.add(message_type_cell(config) or "")
            texts.add(show_attributes(config.attributes))
    return {name: {"messageType": _cell(types), "attributes": _cell(texts)}
            for name, (types, texts) in found.items()}


def _cell(values: set[str]) -> str | None:
    if values <= {""}:
        return None
    return "/".join(sorted(v or "(none)" for v in values))
