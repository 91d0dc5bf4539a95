"""Returning a failed message for redelivery: CONSUMER_SEND_MSG_BACK, or a resend to %RETRY%.

How this works (client-behaviour.md §8): a concurrent consumer first asks the broker the
message came from to copy it into ``%RETRY%<group>`` (CONSUMER_SEND_MSG_BACK; delay level 0
lets the broker use 3 + reconsumeTimes).  If that call fails, the client sends a new message
to ``%RETRY%<group>`` itself through the instance's inner producer: same body, flag and
properties, plus RETRY_TOPIC (the original topic), ORIGIN_MESSAGE_ID, RECONSUME_TIME,
MAX_RECONSUME_TIMES and delay level 3 + reconsumeTimes, TRAN_MSG removed.  An orderly
consumer past its max reconsume times uses only the resend, with RECONSUME_TIME equal to
MAX_RECONSUME_TIMES, so the broker routes the message to ``%DLQ%<group>``.
"""

from __future__ import annotations

import logging

from engine.client.consume.consume_from import retry_topic
from engine.client.core.errors import ClientError
from engine.client.core.instance import CLIENT_INNER_PRODUCER_GROUP, ClientInstance
from engine.client.core.members import InnerProducer
from engine.client.core.message import PROPERTY_RECONSUME_TIME, Message, MessageExt
from engine.client.produce.producer import Producer
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)

log = logging.getLogger(__name__)

FIRST_RETRY_LEVEL = 3


async def send_message_back(instance: ClientInstance, group: str, msg: MessageExt,
                            delay_level: int, max_reconsume: int) -> bool:
    """CONSUMER_SEND_MSG_BACK, falling back to a resend; False when both failed."""
    addr = instance.master_addr(msg.broker_name) if msg.broker_name else None
    if addr is None:
        addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
    header = ConsumerSendMsgBackRequestHeader(
        offset=msg.commit_log_offset, group=group, delay_level=delay_level,
        origin_msg_id=msg.msg_id, origin_topic=msg.topic, unit_mode=False,
        max_reconsume_times=max_reconsume)
    try:
        await instance.api.send_back(addr, header)
        return True
    except ClientError as exc:
        log.warning("send back of %s to %s failed (%s); resending to %s", msg.msg_id, addr,
                    exc, retry_topic(group))
    return await resend_to_retry(instance, group, msg, reconsume_time=msg.reconsume_times + 1,
                                 max_reconsume=max_reconsume)


async def resend_to_retry(instance: ClientInstance, group: str, msg: MessageExt, *,
                          reconsume_time: int, max_reconsume: int) -> bool:
    """Send a copy of `msg` to ``%RETRY%<group>`` with the inner producer."""
    props = dict(msg.properties)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or msg.msg_id
    props[PROPERTY_RETRY_TOPIC] = msg.topic
    props[PROPERTY_RECONSUME_TIME] = str(reconsume_time)
    props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume)
    props[PROPERTY_DELAY_TIME_LEVEL] = str(FIRST_RETRY_LEVEL + msg.reconsume_times)
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    copy = Message(retry_topic(group), msg.body, flag=msg.flag, system_properties=props)
    producer = inner_producer(instance)
    try:
        await producer.start()
        await producer.send(copy)
        return True
    except ClientError as exc:
        log.warning("resend of %s to %s failed: %s", msg.msg_id, retry_topic(group), exc)
        return False


def inner_producer(instance: ClientInstance) -> InnerProducer:
    """The instance's own producer (group CLIENT_INNER_PRODUCER), made on first use."""
    if instance.inner_producer is None:
        instance.inner_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, instance=instance,
                                           register=False)
    return instance.inner_producer
