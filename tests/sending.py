"""Test helpers: one message sent to one queue, and a heartbeat, over a raw `RemotingClient`."""

from __future__ import annotations

from engine.client.core.client_api import ClientAPI
from engine.client.core.message import Message
from engine.client.core.results import SendResult
from engine.client.core.send_codec import prepare_message, single_request
from engine.protocol.body.heartbeat import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.remoting.client import RemotingClient

TIMEOUT = 5.0
NEVER_COMPRESS = 1 << 62


async def send_one(client: RemotingClient, addr: str, broker_name: str, topic: str,
                   body: bytes = b"x", *, queue_id: int = 0, tags: str | None = None,
                   keys: str | None = None, group: str = "TEST_PRODUCER") -> SendResult:
    """SEND_MESSAGE_V2 of one message to queue `queue_id` of the broker at `addr` (body
    never compressed, so tests fill segments with what they send)."""
    msg = Message(topic, body, tags=tags, keys=keys)
    props, uniq = prepare_message(msg)
    mq = MessageQueue(topic, broker_name, queue_id)
    cmd = single_request(msg, props, mq, group=group, compress_over=NEVER_COMPRESS)
    return await ClientAPI(client, TIMEOUT).send(addr, cmd, mq, uniq, TIMEOUT)


async def heartbeat(client: RemotingClient, addr: str, client_id: str, *,
                    consumer_group: str | None = None, topics: tuple[str, ...] = (),
                    producer_group: str | None = None) -> None:
    """HEART_BEAT registering a push consumer of `topics` and/or a producer."""
    consumers: frozenset[ConsumerData] = frozenset()
    if consumer_group is not None:
        subs = frozenset(SubscriptionData.build(t, "*") for t in topics)
        consumers = frozenset({ConsumerData(consumer_group, ConsumeType.CONSUME_PASSIVELY,
                                            subscription_data_set=subs)})
    producers = frozenset({ProducerData(producer_group)}) if producer_group else frozenset()
    await ClientAPI(client, TIMEOUT).heartbeat(addr, HeartbeatData(client_id, producers,
                                                                   consumers))
