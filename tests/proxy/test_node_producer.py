"""The official Node.js client's Producer through the proxy: normal, FIFO, delay, transactions."""

from __future__ import annotations

import time
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.proxy.route import queue_for_group, write_queues
from tests.proxy.conftest import Stack, running_stack, stored
from tests.proxy.nodejs import NodeClient


def sent(events: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in events if e["event"] == "sent"]


async def test_normal_messages_are_stored_with_their_properties(
        stack: Stack, node_client: NodeClient) -> None:
    await stack.create_topic("Normal")
    receipts = sent(await node_client.run(
        "producer.js", endpoint=stack.endpoint, topic="Normal", messages=[
            {"body": f"body-{i}", "tag": "TagA", "keys": ["k1", "k2"],
             "properties": {"color": "blue"}} for i in range(3)]))
    assert len(receipts) == 3
    for i, receipt in enumerate(receipts):
        record = await stored(stack, "Normal", str(receipt["messageId"]))
        props = record.properties()
        assert record.body == f"body-{i}".encode()
        assert props["TAGS"] == "TagA"
        assert props["KEYS"] == "k1 k2"
        assert props["color"] == "blue"
        assert props["PGROUP"] == "Normal"  # 5.3: a gRPC producer's group is the topic
        # The receipt's offset is the stored one; its queue is the client's pick of a broker,
        # the proxy chooses the queue itself as Apache's does.
        assert record.queue_offset == receipt["offset"]


async def test_fifo_messages_of_a_group_share_the_queue_apache_picks(
        stack: Stack, node_client: NodeClient) -> None:
    await stack.create_topic("Fifo", queues=8, message_type="FIFO")
    receipts = sent(await node_client.run(
        "producer.js", endpoint=stack.endpoint, topic="Fifo",
        messages=[{"body": str(i), "messageGroup": "order-42"} for i in range(5)]))
    route = await stack.proxy.gateway.route("Fifo")
    expected = queue_for_group(write_queues(route), "order-42").queue_id
    records = [await stored(stack, "Fifo", str(r["messageId"])) for r in receipts]
    assert [r.body for r in records] == [str(i).encode() for i in range(5)]
    assert {r.queue_id for r in records} == {expected}
    assert [r.queue_offset for r in records] == sorted(r.queue_offset for r in records)
    assert all(r.properties()["__SHARDINGKEY"] == "order-42" for r in records)


async def test_delay_message_carries_its_delivery_time(
        stack: Stack, node_client: NodeClient) -> None:
    await stack.create_topic("Delay", message_type="DELAY")
    deliver_at_ms = int(time.time() * 1000) + 1500  # the Node client keeps milliseconds
    (receipt,) = sent(await node_client.run(
        "producer.js", endpoint=stack.endpoint, topic="Delay",
        messages=[{"body": "later", "deliveryTimestampMs": deliver_at_ms}]))
    record = await stored(stack, "Delay", str(receipt["messageId"]))
    assert record.properties()["TIMER_DELIVER_MS"] == str(deliver_at_ms)


async def test_a_normal_message_to_a_fifo_topic_is_refused_by_the_settings(
        stack: Stack, node_client: NodeClient) -> None:
    await stack.create_topic("FifoOnly", message_type="FIFO")
    async with node_client.start("producer.js", endpoint=stack.endpoint, topic="FifoOnly",
                                 messages=[{"body": "no group"}]) as scenario:
        error = await scenario.next("error")
    # The client refuses it itself, from the topic's types in the proxy's settings (FIFO = 2).
    assert "acceptMessageTypes=[2]" in str(error["message"]), error


async def test_transaction_commit_and_rollback(stack: Stack, node_client: NodeClient) -> None:
    await stack.create_topic("Txn", message_type="TRANSACTION")
    rolled, committed = sent(await node_client.run(
        "transaction.js", endpoint=stack.endpoint, topic="Txn"))
    assert (rolled["resolution"], committed["resolution"]) == ("rollback", "commit")
    record = await stored(stack, "Txn", str(committed["messageId"]))
    assert record.body == b"yes"
    # The rollback was answered before the commit was sent: by now it is settled.
    try:
        await stored(stack, "Txn", str(rolled["messageId"]), timeout=0.5)
    except AssertionError:
        pass
    else:
        raise AssertionError("a rolled back message reached the topic")


async def test_orphaned_transaction_is_checked_by_the_clients_checker(
        tmp_path: Path, namesrv: NamesrvController, node_client: NodeClient) -> None:
    async with running_stack(tmp_path, namesrv, transaction_time_out=0,
                             transaction_check_interval=200) as stack:
        await stack.create_topic("Orphan", message_type="TRANSACTION")
        async with node_client.start("transaction.js", endpoint=stack.endpoint,
                                     topic="Orphan", orphan=True) as scenario:
            receipt = await scenario.next("sent")
            # Never committed: the broker asks, the proxy passes the question to the client's
            # checker over Telemetry, and its COMMIT comes back as END_TRANSACTION.
            checked = await scenario.next("checked", timeout=30)
            record = await stored(stack, "Orphan", str(receipt["messageId"]), timeout=30)
            await scenario.finish()
    assert checked["messageId"] == receipt["messageId"]
    assert checked["body"] == "decide later"
    assert record.body == b"decide later"
