"""Request builders for broker tests: what a Java client would send."""

from __future__ import annotations

import time

from engine.protocol import fastjson
from engine.protocol.body.heartbeat import (
    ConsumerData,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    send_header_v2,
)
from engine.protocol.message import properties_to_string
from engine.protocol.wire import to_ext, to_json


def send_request(topic: str, body: bytes, *, queue_id: int = 0, tags: str | None = None,
                 keys: str | None = None, v2: bool = True, batch: bool = False,
                 extra: dict[str, str] | None = None, group: str = "PG",
                 reconsume_times: int | None = None) -> RemotingCommand:
    props: dict[str, str | None] = {"TAGS": tags, "KEYS": keys, "WAIT": "true", **(extra or {})}
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(props), reconsume_times=reconsume_times, batch=batch)
    if batch:
        return request(RequestCode.SEND_BATCH_MESSAGE, to_ext(send_header_v2(header)), body)
    if v2:
        return request(RequestCode.SEND_MESSAGE_V2, to_ext(send_header_v2(header)), body)
    return request(RequestCode.SEND_MESSAGE, to_ext(header), body)


def pull_request(topic: str, queue_id: int, offset: int, *, group: str = "CG",
                 max_nums: int = 32, suspend_ms: int = 0, subscription: str = "*",
                 commit_offset: int | None = None, expression_type: str = "TAG",
                 in_request: bool = True) -> RemotingCommand:
    flag = 0x4 if in_request else 0  # subscription in the request
    if suspend_ms:
        flag |= 0x2
    if commit_offset is not None:
        flag |= 0x1
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=flag, commit_offset=commit_offset or 0,
        suspend_timeout_millis=suspend_ms, sub_version=0, subscription=subscription,
        expression_type=expression_type)
    return request(RequestCode.PULL_MESSAGE, to_ext(header))


def heartbeat(client_id: str, *, consumer_group: str | None = None,
              topics: tuple[str, ...] = (), producer_group: str | None = None) -> RemotingCommand:
    consumers = frozenset()
    if consumer_group is not None:
        subs = frozenset(SubscriptionData.build(t, "*", sub_version=1) for t in topics)
        consumers = frozenset({ConsumerData(consumer_group, subscription_data_set=subs)})
    producers = frozenset({ProducerData(producer_group)}) if producer_group else frozenset()
    data = HeartbeatData(client_id, producers, consumers)
    return request(RequestCode.HEART_BEAT, None, fastjson.dumpb(to_json(data)))
