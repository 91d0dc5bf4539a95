"""The official Node.js client's SimpleConsumer and PushConsumer through the proxy (over POP)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from tests.proxy.conftest import Stack, running_stack
from tests.proxy.nodejs import NodeClient
from tests.proxy.test_simple_consumer import CONSUMER_PROXY, GROUP, QUICK_REVIVE, broker_pops

#: The consumers' long polls (the client's default is 30 s): empty receives take 1 s.
AWAIT_MS = 1000


@pytest.fixture
async def pop_stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, CONSUMER_PROXY, **QUICK_REVIVE) as stack:
        if not await broker_pops(stack):
            pytest.skip("the broker does not serve POP_MESSAGE yet (5.x POP, issue 24)")
        await stack.create_topic("Pops")
        yield stack


async def send(stack: Stack, node_client: NodeClient, *bodies: str) -> list[str]:
    """Send `bodies` to Pops (tag TagA) with the Node producer; their message ids."""
    events = await node_client.run("producer.js", endpoint=stack.endpoint, topic="Pops",
                                   messages=[{"body": b, "tag": "TagA"} for b in bodies])
    return [str(e["messageId"]) for e in events if e["event"] == "sent"]


def of(events: list[dict[str, object]], event: str) -> list[dict[str, object]]:
    return [e for e in events if e["event"] == event]


async def consume(stack: Stack, node_client: NodeClient, script: str,
                  **args: object) -> list[dict[str, object]]:
    return await node_client.run(script, endpoint=stack.endpoint, topic="Pops", group=GROUP,
                                 tag="TagA", awaitMs=AWAIT_MS, **args)


async def test_receive_and_ack(pop_stack: Stack, node_client: NodeClient) -> None:
    ids = await send(pop_stack, node_client, "a", "b", "c")
    events = await consume(pop_stack, node_client, "receive_ack.js", count=3)
    received = of(events, "received")
    assert sorted(str(m["messageId"]) for m in received) == sorted(ids)
    assert {m["body"] for m in received} == {"a", "b", "c"}
    assert {(m["topic"], m["tag"], m["deliveryAttempt"]) for m in received} == {
        ("Pops", "TagA", 1)}
    assert sorted(str(a["messageId"]) for a in of(events, "acked")) == sorted(ids)
    assert of(events, "after") == [{"event": "after", "messageIds": []}]  # nothing came back


async def test_unacked_message_comes_back_after_its_invisible_time(
        pop_stack: Stack, node_client: NodeClient) -> None:
    (msg_id,) = await send(pop_stack, node_client, "again")
    events = await consume(pop_stack, node_client, "redelivery.js")
    first, again = of(events, "received")
    assert first["messageId"] == again["messageId"] == msg_id
    assert again["deliveryAttempt"] == first["deliveryAttempt"] + 1  # type: ignore[operator]
    assert [a["messageId"] for a in of(events, "acked")] == [msg_id]


async def test_change_invisible_duration_brings_a_message_back_sooner(
        pop_stack: Stack, node_client: NodeClient) -> None:
    (msg_id,) = await send(pop_stack, node_client, "nack")
    events = await consume(pop_stack, node_client, "change_invisible.js")
    assert of(events, "changed") == [{"event": "changed", "messageId": msg_id,
                                      "newHandle": True}]
    assert [m["messageId"] for m in of(events, "received")] == [msg_id, msg_id]
    # Acked with the handle ChangeInvisibleDuration answered (the first one is spent).
    assert [a["messageId"] for a in of(events, "acked")] == [msg_id]


async def test_delay_message_is_received_with_its_delivery_time(
        pop_stack: Stack, node_client: NodeClient) -> None:
    await pop_stack.create_topic("Delay", message_type="DELAY")
    deliver_at_ms = int(time.time() * 1000) + 1500
    events = await node_client.run("producer.js", endpoint=pop_stack.endpoint, topic="Delay",
                                   messages=[{"body": "later",
                                              "deliveryTimestampMs": deliver_at_ms}])
    (msg_id,) = [e["messageId"] for e in of(events, "sent")]
    events = await node_client.run("receive_ack.js", endpoint=pop_stack.endpoint, topic="Delay",
                                   group=GROUP, awaitMs=AWAIT_MS, count=1, after=False)
    (received,) = of(events, "received")
    assert (received["messageId"], received["body"]) == (msg_id, "later")
    # The time it was set for, in milliseconds (when it is delivered is the broker's timers').
    assert received["deliveryTimestampMs"] == deliver_at_ms


async def test_push_consumer_gets_a_failed_message_again(
        pop_stack: Stack, node_client: NodeClient) -> None:
    async with node_client.start("push_consumer.js", endpoint=pop_stack.endpoint,
                                 topic="Pops", group=GROUP) as scenario:
        await scenario.next("started")
        (msg_id,) = await send(pop_stack, node_client, "fails once")
        failed = await scenario.next("consumed")
        succeeded = await scenario.next("consumed")
        await scenario.finish()
    assert (failed["messageId"], failed["result"]) == (msg_id, "FAILURE")
    assert (succeeded["messageId"], succeeded["result"]) == (msg_id, "SUCCESS")
    assert succeeded["deliveryAttempt"] == failed["deliveryAttempt"] + 1
