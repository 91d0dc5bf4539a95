"""The quick consume-stats decoders read what the generic decoder reads: escaped names,
pull offsets, TPS in Java's exponent form, groups without offsets, and any other layout
handed to the generic decoder."""

from __future__ import annotations

from engine.client.core.broker_call import decode_body
from engine.protocol import fastjson
from engine.protocol.body.admin import ConsumeStats, ConsumeStatsList, OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.wire import to_json
from mqadmin.operations.stats_bodies import decode_broker_consume_stats

ODD = MessageQueue('odd"topic\\', "broker-a", 0)
RETRY = MessageQueue("%RETRY%g", "broker-a", 7)
STATS = ConsumeStatsList([
    {"TOOLS_CONSUMER": []},
    {'g"1': [ConsumeStats({ODD: OffsetWrapper(5, 3, 17, 4)}, 1.5),
             ConsumeStats({RETRY: OffsetWrapper(9, 0, 0)}, 0.0)]},
    {"g:[2": [ConsumeStats({MessageQueue("T", "broker-a", q): OffsetWrapper(q, 0, 0)
                            for q in range(3)}, 0.0001)]},
], "127.0.0.1:10911", 27)


def test_broker_wide_stats_read_as_the_generic_decoder_reads_them() -> None:
    body = fastjson.dumpb(to_json(STATS))
    assert b'"consumeTps":0.0001' in body
    body = body.replace(b'"consumeTps":0.0001', b'"consumeTps":1.0E-4')  # as Java writes it
    assert decode_broker_consume_stats(body, "x") == decode_body(ConsumeStatsList, body, "x")
    assert decode_broker_consume_stats(body, "x") == STATS


def test_another_layout_goes_to_the_generic_decoder() -> None:
    body = fastjson.dumpb(to_json(STATS)).replace(b'"consumerOffset"', b'"consumerOffset" ')
    assert decode_broker_consume_stats(body, "x") == STATS
    empty = fastjson.dumpb(to_json(ConsumeStatsList()))
    assert decode_broker_consume_stats(empty, "x") == ConsumeStatsList()


def test_apache_5_3_bytes() -> None:
    """5.3.3's answer as it sends it: `pullOffset` 0 in each entry (the broker-wide answer
    never sets it), `totalInflightDiff` after `totalDiff`."""
    mq = b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
    body = (b'{"brokerAddr":"192.168.1.10:10911","consumeStatsList":[{"CG":[{"consumeTps":'
            b'2.5E-2,"offsetTable":{' + mq + b':{"brokerOffset":10,"consumerOffset":5,'
            b'"lastTimestamp":1700000000000,"pullOffset":0}}}]},{"idle":[]}],"totalDiff":5,'
            b'"totalInflightDiff":0}')
    found = decode_broker_consume_stats(body, "x")
    assert found == decode_body(ConsumeStatsList, body, "x")
    assert found == ConsumeStatsList(
        [{"CG": [ConsumeStats({MessageQueue("T", "broker-a", 0):
                               OffsetWrapper(10, 5, 1700000000000, 0)}, 0.025)]},
         {"idle": []}], "192.168.1.10:10911", 5)
