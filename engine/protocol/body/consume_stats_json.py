"""GET_BROKER_CONSUME_STATS bodies written directly, byte for byte as the generic writer
(`fastjson.dumpb(to_json(value))`) writes them.

How this works: a big broker's answer is one shape repeated, an offset-table entry per
group and queue (12,000 on a broker of 3,000 groups); the generic writer turns each into
dicts and an `ObjectKey` first, then sorts and writes them, which took most of the request's
CPU.  Here each entry is formatted once, as text, and a topic's entries sorted by that text
(fastjson sorts object keys by their JSON: "queueId":10 before "queueId":2)::

    {"brokerAddr":S,"consumeStatsList":[{GROUP:[{"consumeTps":F,"offsetTable":{
        {"brokerName":S,"queueId":N,"topic":S}:{"brokerOffset":N,"consumerOffset":N,
         "lastTimestamp":N[,"pullOffset":N]},...}},...]},...],"totalDiff":N}
"""

from __future__ import annotations

import orjson

from engine.protocol.body.admin import ConsumeStats, ConsumeStatsList, OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue


def _text(value: object) -> str:
    return orjson.dumps(value).decode()


def _entry(mq: MessageQueue, w: OffsetWrapper) -> tuple[str, str]:
    key = (f'{{"brokerName":{_text(mq.broker_name)},"queueId":{mq.queue_id},'
           f'"topic":{_text(mq.topic)}}}')
    pull = f',"pullOffset":{w.pull_offset}' if w.pull_offset is not None else ""
    return key, (f'{{"brokerOffset":{w.broker_offset},"consumerOffset":{w.consumer_offset},'
                 f'"lastTimestamp":{w.last_timestamp}{pull}}}')


def _stats(stats: ConsumeStats) -> str:
    entries = sorted(_entry(mq, w) for mq, w in stats.offset_table.items())
    table = ",".join(f"{k}:{v}" for k, v in entries)
    return f'{{"consumeTps":{_text(stats.consume_tps)},"offsetTable":{{{table}}}}}'


def encode_consume_stats_list(value: ConsumeStatsList) -> bytes:
    """The body of `value` (GET_BROKER_CONSUME_STATS's answer)."""
    groups = ",".join(
        "{" + ",".join(f"{_text(g)}:[{','.join(map(_stats, entry[g]))}]" for g in sorted(entry))
        + "}" for entry in value.consume_stats_list)
    addr = f'"brokerAddr":{_text(value.broker_addr)},' if value.broker_addr is not None else ""
    return (f'{{{addr}"consumeStatsList":[{groups}],"totalDiff":{value.total_diff}}}'
            .encode())
