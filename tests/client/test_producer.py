"""The producer against our broker: every send mode, batches, ordering, compression, delays."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import (
    ClientStateError,
    MessageIllegalError,
    MessageValidationError,
    NoRouteError,
)
from engine.client.core.message import Message
from engine.client.core.results import SendResult, SendStatus
from engine.client.produce.producer import Producer, ProducerOptions, select_by_hash
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import (
    MessageRecord,
    decode_offset_msg_id,
    decode_record,
    string_to_properties,
)
from engine.store.record_scan import SCHEDULE_TOPIC
from tests.clock import ManualClock

from .conftest import BrokerFactory, make_topic

TOPIC = "ProducerTopic"


def stored(broker: BrokerController, result: SendResult, index: int = 0) -> MessageRecord:
    """The record a send result names, read from the broker's commit log."""
    offset_id = result.offset_msg_id.split(",")[index]
    (_, port), offset = decode_offset_msg_id(offset_id)
    assert port == broker.port
    data = broker.state.store.look_message_by_offset(offset)
    assert data is not None
    return decode_record(data)


@pytest.fixture
async def producer(client_config: ClientConfig, track: Callable[[Any], Any]) -> Producer:
    p: Producer = track(Producer("PG", client_config))
    await p.start()
    return p


async def test_sync_send_returns_ids_queue_and_offset(start_broker: BrokerFactory,
                                                      producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    msg = Message(TOPIC, b"hello", tags="TagA", keys=["k1", "k2"], properties={"seq": "1"})
    first = await producer.send(msg)
    second = await producer.send(msg)
    assert first.status is SendStatus.SEND_OK and first.region_id == "DefaultRegion"
    assert first.message_queue.topic == TOPIC and first.message_queue.broker_name == "broker-a"
    assert first.msg_id != second.msg_id and len(first.msg_id) == 32
    assert first.message_queue != second.message_queue  # round robin
    record = stored(broker, first)
    props = record.properties()
    assert record.body == b"hello" and record.queue_id == first.message_queue.queue_id
    assert record.queue_offset == first.queue_offset
    assert props["UNIQ_KEY"] == first.msg_id and props["TAGS"] == "TagA"
    assert props["KEYS"] == "k1 k2" and props["seq"] == "1"


async def test_async_and_oneway_sends(start_broker: BrokerFactory, producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    seen: list[SendResult] = []
    task = producer.send_async(Message(TOPIC, b"async"), on_success=seen.append)
    result = await task
    assert seen == [result] and result.status is SendStatus.SEND_OK
    for i in range(3):
        await producer.send_oneway(Message(TOPIC, f"oneway-{i}".encode()))
    last = await producer.send(Message(TOPIC, b"after"))  # same connection: oneways are in
    assert last.queue_offset == 4
    failures: list[BaseException] = []
    bad = producer.send_async(Message("bad topic!", b"x"), on_exception=failures.append)
    with pytest.raises(MessageValidationError):
        await bad
    assert isinstance(failures[0], MessageValidationError)


async def test_batches_are_one_request_per_4_mib(start_broker: BrokerFactory,
                                                 client_config: ClientConfig,
                                                 track: Callable[[Any], Any]) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    small = track(Producer("BatchPG", client_config,
                           options=ProducerOptions(max_message_size=2048)))
    await small.start()
    msgs = [Message(TOPIC, f"batch-{i}".encode() * 20, tags="B") for i in range(20)]
    results = await small.send_batch(msgs)
    assert len(results) > 1
    ids = [i for r in results for i in r.msg_id.split(",")]
    assert len(ids) == 20 and len(set(ids)) == 20
    offset = 0
    for result in results:
        count = len(result.msg_id.split(","))
        assert result.queue_offset == offset and len(result.offset_msg_id.split(",")) == count
        offset += count
        for i in range(count):
            assert stored(broker, result, i).properties()["UNIQ_KEY"] == (
                result.msg_id.split(",")[i])
    assert stored(broker, results[0]).body == msgs[0].body


async def test_ordered_sends_keep_one_key_on_one_queue(start_broker: BrokerFactory,
                                                       producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    by_order: dict[str, list[SendResult]] = {}
    for i in range(12):
        order = f"order-{i % 3}"
        result = await producer.send_select(Message(TOPIC, f"{order}:{i}".encode()),
                                            select_by_hash, order)
        by_order.setdefault(order, []).append(result)
    for results in by_order.values():
        assert len({r.message_queue for r in results}) == 1
        offsets = [r.queue_offset for r in results]
        assert offsets == sorted(offsets)
    target = MessageQueue(TOPIC, "broker-a", 2)
    assert (await producer.send_to_queue(Message(TOPIC, b"q2"), target)).message_queue == target


async def test_large_bodies_travel_compressed(start_broker: BrokerFactory,
                                              producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    body = b"compress me " * 1000
    result = await producer.send(Message(TOPIC, body))
    record = stored(broker, result)
    assert record.sysflag & 0x301 == 0x301 and len(record.body) < len(body) // 10
    assert zlib.decompress(record.body) == body
    plain = stored(broker, await producer.send(Message(TOPIC, b"y" * 4095)))
    assert plain.sysflag & 0x1 == 0


async def test_delay_level_parks_the_message_until_due(start_broker: BrokerFactory,
                                                       producer: Producer) -> None:
    clock = ManualClock()
    broker = await start_broker(clock=clock, message_delay_level="5s 10s")
    await make_topic(broker, TOPIC, queues=1)
    result = await producer.send(Message(TOPIC, b"later", delay_time_level=2))
    assert result.message_queue.topic == TOPIC
    store = broker.state.store
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 1
    assert store.get_max_offset_in_queue(TOPIC, 0) == 0
    clock.advance(10_000)
    await broker.state.schedule.run_once()
    assert store.get_max_offset_in_queue(TOPIC, 0) == 1


async def test_new_topics_are_created_through_tbw102(start_broker: BrokerFactory,
                                                     producer: Producer) -> None:
    broker = await start_broker()
    result = await producer.send(Message("BrandNewTopic", b"first"))
    assert result.status is SendStatus.SEND_OK
    config = broker.state.topics.get("BrandNewTopic")
    assert config is not None and config.write_queue_nums == 4  # defaultTopicQueueNums


async def test_refusals_and_misuse(start_broker: BrokerFactory, client_config: ClientConfig,
                                   producer: Producer, track: Callable[[Any], Any]) -> None:
    await start_broker(auto_create_topic_enable=False)
    with pytest.raises(NoRouteError):
        await producer.send(Message("NotCreated", b"x"))
    for bad in (Message(TOPIC, b""), Message("bad topic", b"x"), Message("TBW102", b"x")):
        with pytest.raises(MessageValidationError):
            await producer.send(bad)
    idle = track(Producer("IdlePG", client_config))
    with pytest.raises(ClientStateError):
        await idle.send(Message(TOPIC, b"x"))


async def test_a_refusal_that_is_not_retryable_raises_at_once(start_broker: BrokerFactory,
                                                              producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    with pytest.raises(MessageIllegalError):  # properties over 32767 bytes: code 13
        await producer.send(Message(TOPIC, b"x", properties={"big": "v" * 40_000}))
    assert sum(broker.state.store.get_max_offset_in_queue(TOPIC, q) for q in range(4)) == 0


async def test_concurrent_sends_share_the_connection(start_broker: BrokerFactory,
                                                     producer: Producer) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC)
    results = await asyncio.gather(*(producer.send(Message(TOPIC, f"m{i}".encode()))
                                     for i in range(50)))
    assert len({r.msg_id for r in results}) == 50
    total = sum(broker.state.store.get_max_offset_in_queue(TOPIC, q) for q in range(4))
    assert total == 50
    assert string_to_properties(stored(broker, results[0]).properties_raw.decode())
