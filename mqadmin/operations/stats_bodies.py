"""Quick decoders of the consume-stats bodies (GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS)
as fastjson writes them.

How this works: a broker's consume stats are mostly one shape repeated, an offset-table
entry ``{"brokerName":..,"queueId":..,"topic":..}:{"brokerOffset":..,...}`` (fastjson writes
fields sorted, Apache's brokers and this engine's alike), which one regex pass reads many
times quicker than the generic decoder (`decode_body`: the marked object keys, orjson, then
the dataclasses).  The broker-wide answer adds the group (``{"group":[``) and each topic's
``"consumeTps"`` ahead of its entries, read in the same pass.  Whenever the entries found
do not account for every ``"queueId":`` of the body (a layout this does not know), the
generic decoder reads it instead.
"""

from __future__ import annotations

import json
import re

from engine.client.core.broker_call import decode_body
from engine.protocol.body.admin import ConsumeStats, ConsumeStatsList, OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue

_STR = rb'"((?:[^"\\]|\\.)*)"'
#: One entry of a ConsumeStats offset table (7 groups: broker name, queue id, topic,
#: broker offset, consumer offset, last timestamp, pull offset or None).
_ENTRY = (rb'\{"brokerName":' + _STR + rb',"queueId":(-?\d+),"topic":' + _STR
          + rb'\}:\{"brokerOffset":(-?\d+),"consumerOffset":(-?\d+),'
          rb'"lastTimestamp":(-?\d+)(?:,"pullOffset":(-?\d+))?\}')
ENTRY = re.compile(_ENTRY)
#: The broker-wide answer: a group's list opening (group 1), a topic's TPS (group 2), or
#: an entry (groups 3-9).
_WIDE = re.compile(rb'\{' + _STR + rb':\[|"consumeTps":(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)|'
                   + _ENTRY)
_LIST = b'"consumeStatsList":['


def _text(raw: bytes) -> str:
    return json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode()


def _entry(m: re.Match[bytes], at: int) -> tuple[MessageQueue, OffsetWrapper]:
    pull = m[at + 6]
    return (MessageQueue(_text(m[at + 2]), _text(m[at]), int(m[at + 1])),
            OffsetWrapper(int(m[at + 3]), int(m[at + 4]), int(m[at + 5]),
                          int(pull) if pull else None))


def decode_consume_stats(body: bytes | None, addr: str) -> dict[MessageQueue, OffsetWrapper]:
    """A GET_CONSUME_STATS body's offset table."""
    if not body:
        return {}
    found = dict(_entry(m, 1) for m in ENTRY.finditer(body))
    if len(found) == body.count(b'"queueId":'):
        return found
    return decode_body(ConsumeStats, body, addr).offset_table


def decode_broker_consume_stats(body: bytes | None, addr: str) -> ConsumeStatsList:
    """A GET_BROKER_CONSUME_STATS body: every group's consume stats per topic."""
    start = body.find(_LIST) if body else -1
    if body is None or start < 0:
        return decode_body(ConsumeStatsList, body, addr)
    groups: list[dict[str, list[ConsumeStats]]] = []
    topics: list[ConsumeStats] = []
    table: dict[MessageQueue, OffsetWrapper] = {}
    entries = 0
    for m in _WIDE.finditer(body, start + len(_LIST)):
        if m[1] is not None:
            topics = []
            groups.append({_text(m[1]): topics})
        elif m[2] is not None:
            table = {}
            topics.append(ConsumeStats(table, float(m[2])))
        elif topics:
            mq, w = _entry(m, 3)
            table[mq] = w
            entries += 1
    if entries != body.count(b'"queueId":') or sum(map(len, (
            t.offset_table for g in groups for ts in g.values() for t in ts))) != entries:
        return decode_body(ConsumeStatsList, body, addr)
    head = re.search(rb'"brokerAddr":' + _STR, body[:start])
    total = re.search(rb'"totalDiff":(-?\d+)', body)
    return ConsumeStatsList(groups, _text(head[1]) if head else None,
                            int(total[1]) if total else 0)
