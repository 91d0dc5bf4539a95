"""The official 5.x Python Producer through the proxy: normal, FIFO, delay, transactions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.proxy.route import queue_for_group, write_queues
from tests.proxy.conftest import Stack, in_thread, running_stack, stored
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)


def message(topic: str, body: bytes, **fields: object) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    for key, value in fields.items():
        if key == "keys":
            msg.keys = value
        elif key == "props":
            for k, v in dict(value).items():  # type: ignore[call-overload]
                msg.add_property(k, v)
        else:
            setattr(msg, key, value)
    return msg


async def started(stack: Stack, *topics: str, checker: TransactionChecker | None = None
                  ) -> Producer:
    config = ClientConfiguration(stack.endpoint, Credentials())
    producer = (Producer(config, topics) if checker is None
                else Producer(config, topics, checker))
    await in_thread(producer.startup)
    # A producer starts without waiting for the proxy's settings (it checks message types
    # until they say otherwise): wait for them, as the Telemetry exchange delivers them.
    assert await in_thread(producer._init_settings_event.wait, 10)
    return producer


async def test_normal_messages_are_stored_with_their_properties(stack: Stack) -> None:
    await stack.create_topic("Normal")
    producer = await started(stack, "Normal")
    try:
        receipts = [await in_thread(producer.send, message(
            "Normal", f"body-{i}".encode(), tag="TagA", keys="k1",
            props={"color": "blue"})) for i in range(3)]
    finally:
        await in_thread(producer.shutdown)
    for i, receipt in enumerate(receipts):
        record = await stored(stack, "Normal", receipt.message_id)
        props = record.properties()
        assert record.body == f"body-{i}".encode()
        assert props["TAGS"] == "TagA"
        assert props["KEYS"] == "k1"
        assert props["color"] == "blue"
        assert props["PGROUP"] == "Normal"  # 5.3: a gRPC producer's group is the topic
        assert record.queue_offset == receipt.offset


async def test_fifo_messages_of_a_group_share_the_queue_apache_picks(stack: Stack) -> None:
    await stack.create_topic("Fifo", queues=8, message_type="FIFO")
    producer = await started(stack, "Fifo")
    try:
        receipts = [await in_thread(producer.send, message(
            "Fifo", str(i).encode(), message_group="order-42")) for i in range(5)]
    finally:
        await in_thread(producer.shutdown)
    route = await stack.proxy.gateway.route("Fifo")
    expected = queue_for_group(write_queues(route), "order-42").queue_id
    records = [await stored(stack, "Fifo", r.message_id) for r in receipts]
    assert {r.queue_id for r in records} == {expected}
    assert [r.queue_offset for r in records] == sorted(r.queue_offset for r in records)
    assert all(r.properties()["__SHARDINGKEY"] == "order-42" for r in records)


async def test_delay_message_carries_its_delivery_time(stack: Stack) -> None:
    await stack.create_topic("Delay", message_type="DELAY")
    producer = await started(stack, "Delay")
    deliver_at = int(time.time()) + 1  # the Python client takes epoch seconds
    try:
        receipt = await in_thread(producer.send, message(
            "Delay", b"later", delivery_timestamp=deliver_at))
    finally:
        await in_thread(producer.shutdown)
    # Stored with the time the broker's timers deliver it at (with timers, once it is due).
    record = await stored(stack, "Delay", receipt.message_id)
    assert record.properties()["TIMER_DELIVER_MS"] == str(deliver_at * 1000)


async def test_transaction_commit_and_rollback(stack: Stack) -> None:
    await stack.create_topic("Txn", message_type="TRANSACTION")
    producer = await started(stack, "Txn", checker=_Answer(TransactionResolution.COMMIT))
    try:
        rolled = await in_thread(producer.begin_transaction)
        rolled_receipt = await in_thread(producer.send, message("Txn", b"no"), rolled)
        await in_thread(rolled.rollback)
        committed = await in_thread(producer.begin_transaction)
        receipt = await in_thread(producer.send, message("Txn", b"yes"), committed)
        await in_thread(committed.commit)
        record = await stored(stack, "Txn", receipt.message_id)
    finally:
        await in_thread(producer.shutdown)
    assert record.body == b"yes"
    # The rollback went first on the same connection: by now it is settled.
    try:
        await stored(stack, "Txn", rolled_receipt.message_id, timeout=0.5)
    except AssertionError:
        pass
    else:
        raise AssertionError("a rolled back message reached the topic")


class _Answer(TransactionChecker):
    def __init__(self, resolution: int) -> None:
        self.resolution = resolution
        self.asked = threading.Event()
        self.message_ids: list[str] = []

    def check(self, message: Message) -> int:  # type: ignore[override]
        self.message_ids.append(message.message_id)
        self.asked.set()
        return self.resolution


async def test_orphaned_transaction_is_checked_through_telemetry(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv, transaction_time_out=0,
                             transaction_check_interval=200) as stack:
        await stack.create_topic("Orphan", message_type="TRANSACTION")
        checker = _Answer(TransactionResolution.COMMIT)
        producer = await started(stack, "Orphan", checker=checker)
        try:
            transaction = await in_thread(producer.begin_transaction)
            receipt = await in_thread(producer.send, message("Orphan", b"decide later"),
                                      transaction)
            # Never committed: the broker asks, the proxy passes the question to the client's
            # checker over Telemetry, and the checker's COMMIT comes back as END_TRANSACTION.
            record = await stored(stack, "Orphan", receipt.message_id, timeout=30)
        finally:
            await in_thread(producer.shutdown)
    assert record.body == b"decide later"
    assert checker.asked.is_set()
    assert receipt.message_id in checker.message_ids
