"""The broker-wide consume stats written directly are the generic writer's bytes: escaped
names, queue ids sorted as fastjson sorts object keys (10 before 2), pull offsets, groups
without offsets, no broker address."""

from __future__ import annotations

from engine.protocol import fastjson
from engine.protocol.body.admin import ConsumeStats, ConsumeStatsList, OffsetWrapper
from engine.protocol.body.consume_stats_json import encode_consume_stats_list
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.wire import to_json


def generic(value: ConsumeStatsList) -> bytes:
    return fastjson.dumpb(to_json(value))


def test_the_bytes_of_the_generic_writer() -> None:
    queues = {MessageQueue("T", "broker-a", q): OffsetWrapper(q * 3, q, 1_700_000_000_000 + q,
                                                             q + 1 if q % 4 == 0 else None)
              for q in range(12)}
    odd = {MessageQueue('odd"topic\\ü', "broker-a", 0): OffsetWrapper(5, 3, 17)}
    value = ConsumeStatsList([
        {"TOOLS_CONSUMER": []},
        {"g1": [ConsumeStats(queues, 1.5), ConsumeStats(odd, 0.0001)]},
        {'g"2': [ConsumeStats({}, 0.0)]},
    ], "127.0.0.1:10911", 42)
    assert encode_consume_stats_list(value) == generic(value)
    assert encode_consume_stats_list(ConsumeStatsList()) == generic(ConsumeStatsList())
