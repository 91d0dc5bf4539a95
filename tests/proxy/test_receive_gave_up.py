"""What the broker pops for a receive nobody waits for any more keeps the receive's invisible
time, as on Apache 5.3.3 (whose stream then fails at its first write and nacks nothing):
not visible again after a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy.v2 import definition_pb2 as pb
from tests.proxy.test_receive_rules import GROUP, TOPIC, Client, rules_client
from tests.proxy.test_simple_consumer import QUICK_REVIVE


@pytest.fixture
async def client(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Client]:
    """test_receive_rules' client, its broker reviving every 200 ms (QUICK_REVIVE): a message
    visible again would be back in the retry topic within a poll."""
    async with rules_client(tmp_path, namesrv, **QUICK_REVIVE) as c:
        yield c


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
    gave_up = asyncio.ensure_future(client.receive(10, polling_ms=2000, invisible_ms=30_000))
    await _until(lambda: state.pop.polling.total > 0)
    gave_up.cancel()
    await asyncio.gather(gave_up, return_exceptions=True)
    # the broker's held pop takes the message for nobody
    await client.send(1)
    await _until(lambda: inflight() == 1)
    # it stays invisible its 30 s: a receive polling 1.5 s (several revive rounds) does not
    # get it back
    again = await client.receive(5, polling_ms=1500)
    assert (again.code, again.messages) == (pb.MESSAGE_NOT_FOUND, [])
    assert inflight() == 1
