"""A cluster with traceTopicEnable and a message sent and consumed by traced clients: the
trace tests of the CLI and of the dashboard."""

from __future__ import annotations

from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    SendResult,
)
from engine.client.produce.producer import Producer
from engine.client.produce.producer_options import ProducerOptions
from engine.protocol.body.heartbeat import ConsumeFromWhere
from tests.client.conftest import Inbox
from tests.mqadmin.conftest import BackgroundCluster

TOPIC = "Orders"  # the topic the `traced` cluster has


def send_and_consume(cluster: BackgroundCluster) -> SendResult:
    """A traced producer sends one message, a traced push consumer consumes it; both have
    written their traces when this returns."""
    async def run() -> SendResult:
        config = ClientConfig(namesrv_addr=cluster.ns, client_ip="127.0.0.1")
        producer = Producer("OrderPG", config, options=ProducerOptions(enable_trace=True))
        consumer = PushConsumer("OrderCG", config, options=ConsumerOptions(
            enable_trace=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
        inbox = Inbox()

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                     ) -> ConsumeConcurrentlyStatus:
            inbox.add(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.subscribe(TOPIC, "*")
        consumer.register_concurrently(listener)
        await producer.start()
        await consumer.start()
        try:
            result = await producer.send(Message(TOPIC, b'{"order": 1}', tags="created",
                                                 keys="order-1"))
            await inbox.wait_for(1)
        finally:
            await consumer.shutdown()  # flushes its trace records
            await producer.shutdown()
        return result

    return cluster.call(run())
