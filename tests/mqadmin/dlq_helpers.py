"""Making dead letters in a test cluster: real send-backs, or many at once straight into a DLQ."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine.client import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerOptions,
    Message,
    MessageExt,
    Producer,
    ProducerOptions,
    PushConsumer,
)
from engine.client.admin import MQAdmin
from engine.client.client_api import ClientAPI
from engine.protocol.body.topic import TopicConfig
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.perm import PERM_RW
from mqadmin.operations.dlq.model import LINK_PROPERTY
from tests.mqadmin.conftest import BackgroundCluster

TAGS = ("TagA", "TagB")


def order_body(n: int) -> bytes:
    return json.dumps({"order": n, "reason": "timeout" if n % 2 else "bad-price"}).encode()


async def _send_all(ns: str, msgs: list[Message]) -> list[Any]:
    producer = Producer("DLQ_TEST_PG", ClientConfig(namesrv_addr=ns),
                        options=ProducerOptions(retry_times_when_send_failed=0))
    await producer.start()
    try:
        return [await producer.send(m) for m in msgs]
    finally:
        await producer.shutdown()


def setup_group(cluster: BackgroundCluster, group: str, topic: str, *, dlq_perm: int | None = None,
                queues: int = 2) -> None:
    """The original topic, the group, its retry topic; and its DLQ with `dlq_perm` (else the
    broker makes it on the first send-back)."""
    cluster.create_topic(topic, queues=queues)
    cluster.create_group(group, retry_max_times=1)

    async def create(admin: MQAdmin) -> None:
        addr = cluster.broker_addr
        await admin.broker.create_topic(addr, TopicConfig("%RETRY%" + group, 1, 1, PERM_RW))
        if dlq_perm is not None:
            await admin.broker.create_topic(addr, TopicConfig("%DLQ%" + group, 1, 1, dlq_perm))
    cluster.admin_call(create)


def bury(cluster: BackgroundCluster, group: str, topic: str, n: int, *, start: int = 0,
         body: bytes | None = None) -> list[str]:
    """Send `n` orders to `topic` and send each back with delay level -1 (straight to the
    DLQ, as the broker does for a message retried too often); their offset message ids
    (what the broker records as ORIGIN_MESSAGE_ID, as Apache does)."""
    msgs = [Message(topic, body or order_body(i), tags=TAGS[i % 2], keys=f"order-{i}",
                    properties={"tenant": f"t{i % 3}", "trace": "x\u00e9y"})
            for i in range(start, start + n)]
    sent = cluster.call(_send_all(cluster.ns, msgs))

    async def back(admin: MQAdmin) -> None:
        api = ClientAPI(admin.client, 5.0)
        for s in sent:
            header = ConsumerSendMsgBackRequestHeader(
                offset=_phy(s.offset_msg_id), group=group, delay_level=-1,
                origin_msg_id=s.msg_id, origin_topic=topic, max_reconsume_times=16)
            await api.send_back(cluster.broker_addr, header)
    cluster.admin_call(back)
    return [s.offset_msg_id for s in sent]


def _phy(offset_msg_id: str) -> int:
    return int(offset_msg_id[-16:], 16)


def stuff(cluster: BackgroundCluster, group: str, topic: str, n: int, *, size: int = 64,
          start: int = 0) -> None:
    """`n` dead letters written straight into ``%DLQ%<group>`` (fast, for big batches)."""
    msgs = [Message("%DLQ%" + group, (b"%08d" % i) + b"x" * max(size - 8, 0), tags=TAGS[i % 2],
                    keys=f"order-{i}", properties={"tenant": f"t{i % 3}"},
                    system_properties={"RETRY_TOPIC": topic, "ORIGIN_MESSAGE_ID": f"ORIG{i}"})
            for i in range(start, start + n)]
    cluster.call(_send_all(cluster.ns, msgs), timeout=120)




class Received:
    """What a push consumer of a group got, on the cluster's loop."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.changed = asyncio.Event()

    def linked(self) -> list[MessageExt]:
        return [m for m in self.messages if LINK_PROPERTY in m.properties]

    async def wait_linked(self, n: int, timeout: float = 20) -> None:
        async def enough() -> None:
            while len(self.linked()) < n:
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(enough(), timeout)


def consume(cluster: BackgroundCluster, group: str, topic: str) -> tuple[PushConsumer, Received]:
    """A started push consumer of `topic` in `group` (commits offsets every 100 ms)."""
    received = Received()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        received.messages += msgs
        received.changed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def start() -> PushConsumer:
        config = ClientConfig(namesrv_addr=cluster.ns, instance_name=f"{group}-test",
                              persist_consumer_offset_interval=100, rebalance_interval=500)
        consumer = PushConsumer(group, config, options=ConsumerOptions(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
        consumer.subscribe(topic, "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        return consumer
    return cluster.call(start()), received


def stop(cluster: BackgroundCluster, consumer: PushConsumer) -> None:
    cluster.call(consumer.shutdown())
