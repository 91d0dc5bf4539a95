"""The read order both offset stores share: memory, then the broker (clustering) or the file
(broadcasting), what a store read finds remembered, and each store's own "none" and "failed"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from engine.client.consume.local_offset_store import LocalFileOffsetStore
from engine.client.consume.offset_store import (
    NO_OFFSET,
    READ_FAILED,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from engine.client.core.client_config import ClientConfig
from engine.client.core.instance import ClientInstance
from engine.protocol.body.message_queue import MessageQueue

from .conftest import BrokerFactory, make_topic

TOPIC = "OffsetReadTopic"
GROUP = "OffsetReadCG"
MQ = MessageQueue(TOPIC, "broker-a", 0)
MEMORY, STORE = ReadOffsetType.MEMORY, ReadOffsetType.STORE
FIRST = ReadOffsetType.MEMORY_FIRST_THEN_STORE


async def check_read_order(store: OffsetStore,
                           put_stored: Callable[[MessageQueue, int], Awaitable[None]]) -> None:
    """With 5 stored: MEMORY never reads the store, MEMORY_FIRST_THEN_STORE reads it only
    while the queue is not in memory, STORE always does; what it reads is remembered."""
    await put_stored(MQ, 5)
    assert await store.read(MQ, MEMORY) == NO_OFFSET and store.table == {}
    assert await store.read(MQ, FIRST) == 5 and store.table == {MQ: 5}
    store.update(MQ, 9, False)
    assert (await store.read(MQ, FIRST), await store.read(MQ, MEMORY)) == (9, 9)
    assert await store.read(MQ, STORE) == 5 and store.table == {MQ: 5}


async def test_the_local_store_reads_memory_then_its_file(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@DEFAULT", GROUP)

    async def put_stored(mq: MessageQueue, offset: int) -> None:
        writer = LocalFileOffsetStore(tmp_path, "10.0.0.1@DEFAULT", GROUP)
        writer.update(mq, offset, False)
        await writer.persist_all([mq])

    await check_read_order(store, put_stored)
    other = MessageQueue(TOPIC, "broker-a", 1)
    assert await store.read(other, STORE) == NO_OFFSET and other not in store.table


async def test_the_remote_store_reads_memory_then_the_broker(
        start_broker: BrokerFactory, client_config: ClientConfig,
        track: Callable[[Any], Any]) -> None:
    broker = await start_broker()
    await make_topic(broker, TOPIC, queues=1)
    instance: ClientInstance = track(ClientInstance(client_config))
    await instance.start()
    store = RemoteBrokerOffsetStore(instance, GROUP)

    async def put_stored(mq: MessageQueue, offset: int) -> None:
        await instance.api.update_consumer_offset(broker.addr, GROUP, mq.topic, mq.queue_id,
                                                  offset)

    await check_read_order(store, put_stored)
    gone = MessageQueue(TOPIC, "broker-gone", 0)
    assert await store.read(gone, STORE) == READ_FAILED and gone not in store.table
