"""What the differential tests against Apache 5.3.3 share: making a topic on either broker,
waiting for its route, and reading a group's dead letters in a comparable form."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from engine.client.admin.broker import BrokerAdmin
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import ResponseCode
from engine.protocol.message import decode_records
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.broker.helpers import pull_request
from tests.proxy.test_receive_rules import headers

#: Makes a topic: its name, queues and message type (None: NORMAL).
CreateTopic = Callable[[str, int, str | None], Awaitable[None]]

#: Properties of a dead letter whose values are the run's own (ids, times, hosts); only
#: their presence is compared.
VOLATILE = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "1ST_POP_TIME", "POP_CK", "MSG_REGION",
            "TRACE_ON", "CLUSTER", "MAX_OFFSET", "MIN_OFFSET", "__BORNHOST"}


def topic_creator(broker_addr: str) -> CreateTopic:
    """Topics made on `broker_addr` with UPDATE_AND_CREATE_TOPIC (Apache's or ours)."""
    async def create(topic: str, queues: int, message_type: str | None) -> None:
        client = RemotingClient()
        try:
            await BrokerAdmin(client).create_topic(
                broker_addr, TopicConfig(topic, queues, queues),
                attributes={"+message.type": message_type} if message_type else None)
        finally:
            await client.close()
    return create


async def routed(stub: service_pb2_grpc.MessagingServiceStub, topic: str) -> None:
    """Once the proxy routes `topic` (a new topic reaches the name server in the background)."""
    for _ in range(100):
        route = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                      metadata=headers(), timeout=10)
        if route.status.code == pb.OK:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{topic} never routed")


async def dead_letters(remoting: RemotingClient, broker: str, group: str) -> list[Any]:
    """The records of `%DLQ%<group>` queue 0 on `broker` (none while it does not exist)."""
    resp = await remoting.invoke(broker, pull_request(f"%DLQ%{group}", 0, 0, group=group),
                                 timeout=10)
    return decode_records(resp.body or b"") if resp.code == ResponseCode.SUCCESS else []


def described(record: Any, tag: str) -> dict[str, Any]:
    """A dead letter as compared: the run's `tag` taken out of names, volatile values hidden."""
    props = record.properties()
    return {"topic": record.topic.replace(tag, "*"), "reconsume": record.reconsume_times,
            "body": record.body,
            "properties": {k: ("..." if k in VOLATILE else v.replace(tag, "*"))
                           for k, v in sorted(props.items())}}
