"""What the broker pops for a receive nobody waits for any more keeps the receive's invisible
time, as on Apache 5.3.3 (whose stream then fails at its first write and nacks nothing):
not visible again after a second."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine.proxy.v2 import definition_pb2 as pb
from tests.proxy.test_receive_rules import GROUP, TOPIC, Client, client

__all__ = ["client"]


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_a_receive_given_up_keeps_its_messages_invisible(client: Client) -> None:
    state = client.ours.broker.state
    queues = range(state.topics.get(TOPIC).read_queue_nums)  # type: ignore[union-attr]

    def inflight() -> int:
        return sum(state.pop.inflight(TOPIC, GROUP, q) for q in queues)

    # a receive held by the broker (the topic is empty), then given up by its client
    gave_up = asyncio.ensure_future(client.receive(10, polling_ms=3000, invisible_ms=30_000))
    await _until(lambda: state.pop.polling.total > 0)
    gave_up.cancel()
    await asyncio.gather(gave_up, return_exceptions=True)
    # the broker's held pop takes the message for nobody
    await client.send(1)
    await _until(lambda: inflight() == 1)
    # it stays invisible its 30 s: a receive polling 3 s does not get it back
    again = await client.receive(5, polling_ms=3000)
    assert (again.code, again.messages) == (pb.MESSAGE_NOT_FOUND, [])
    assert inflight() == 1
