"""SQL92 subscriptions: what the client sends (heartbeat, CHECK_CLIENT_CONFIG, pulls)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ServerError
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import ExpressionType
from engine.protocol.wire import to_json

from .conftest import BrokerFactory, Inbox, make_topic

TOPIC = "SqlTopic"
EXPRESSION = "a > 5 AND region = 'eu'"


def sql_consumer(config: ClientConfig, track: Callable[[Any], Any], *,
                 check: bool = True) -> tuple[PushConsumer, Inbox]:
    consumer: PushConsumer = track(PushConsumer(
        "SqlCG", config, options=ConsumerOptions(check_client_in_broker=check)))
    consumer.subscribe(TOPIC, EXPRESSION, ExpressionType.SQL92)
    inbox = Inbox()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        inbox.add(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_concurrently(listener)
    return consumer, inbox


def test_heartbeat_carries_the_expression_and_its_type(client_config: ClientConfig,
                                                      track: Callable[[Any], Any]) -> None:
    consumer, _ = sql_consumer(client_config, track)
    body = fastjson.dumps(to_json(consumer.consumer_data()))
    assert f'"expressionType":"SQL92","subString":"{EXPRESSION}"' in body
    assert '"codeSet":[]' in body and '"tagsSet":[]' in body


async def test_the_broker_registers_the_sql92_subscription(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker(enable_property_filter=True)
    await make_topic(broker, TOPIC, queues=1)
    consumer, _ = sql_consumer(client_config, track, check=False)
    await consumer.start()
    sub = broker.state.consumers.find_subscription("SqlCG", TOPIC)
    assert sub is not None
    assert sub.expression_type is ExpressionType.SQL92 and sub.sub_string == EXPRESSION


async def test_sql92_filtering_end_to_end(start_broker: BrokerFactory,
                                          client_config: ClientConfig,
                                          track: Callable[[Any], Any]) -> None:
    broker = await start_broker(enable_property_filter=True)
    await make_topic(broker, TOPIC, queues=1)
    consumer, inbox = sql_consumer(client_config, track)
    try:
        await consumer.start()  # CHECK_CLIENT_CONFIG first, as Java's consumer does
    except ServerError as exc:
        pytest.skip(f"this broker does not evaluate SQL92 yet: {exc}")
    producer: Producer = track(Producer("SqlPG", client_config))
    await producer.start()
    for a in range(10):
        for region in ("eu", "us"):
            await producer.send(Message(TOPIC, f"{a}-{region}".encode(),
                                        properties={"a": str(a), "region": region}))
    await inbox.wait_for(4)
    assert sorted(inbox.bodies()) == ["6-eu", "7-eu", "8-eu", "9-eu"]
