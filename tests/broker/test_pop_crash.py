"""POP across a kill -9: a broker process killed after 1,000 pops and 500 acks, then restarted.

The offsets are never flushed before the kill (flushConsumerOffsetInterval 10 min), so the
restarted broker has only its revive topic to go by: every unacked message must come back
(once, through the retry topic), no acked one, nothing popped may be popped again from the
topic itself, and a receipt handed out before the kill must still ack after it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.protocol.header.pop import INIT_MODE_MIN
from engine.remoting.client import RemotingClient
from tests.broker.helpers import send_request
from tests.ha.procs import BrokerProcess, brokers  # noqa: F401  (fixture)
from tests.sending import send_one

from .pop_calls import Popped, ack, batch_ack, pop, pop_until

TOPIC = "Crash"
GROUP = "CrashWorkers"
N = 1000
# Long enough for the kill, the restart and the 50 late acks to come first (about half a
# second alone, a few under load): the revival must be the restarted broker's.
INVISIBLE_MS = 5000


async def pop_all(client: RemotingClient, addr: str, want: int, *, invisible_ms: int,
                  poll_ms: int = 0) -> list[Popped]:
    return await pop_until(client, addr, GROUP, TOPIC, want, poll_ms=poll_ms,
                           invisible_ms=invisible_ms, init_mode=INIT_MODE_MIN)


async def accepting_writes(client: RemotingClient, addr: str) -> None:
    """Until the restarted master takes writes (it waits for a name server to confirm it is
    the master; meanwhile acks are refused, SYSTEM_ERROR, and clients retry them)."""
    async with asyncio.timeout(30):
        while (await client.invoke(addr, send_request("Probe", b"p"), timeout=5)).code != 0:
            await asyncio.sleep(0.05)


async def test_kill_9_after_1000_pops_and_500_acks(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        brokers: list[BrokerProcess]) -> None:  # noqa: F811
    broker = BrokerProcess(tmp_path, "b", f"127.0.0.1:{namesrv.port}", reviveInterval=100,
                           flushConsumerOffsetInterval=600_000, brokerClusterName="PopCluster")
    brokers.append(broker)
    await broker.start()
    await accepting_writes(client, broker.addr)
    for start in range(0, N, 100):
        await asyncio.gather(*(send_one(client, broker.addr, "broker-a", TOPIC,
                                        f"m{i}".encode(), queue_id=i % 4)
                               for i in range(start, start + 100)))
    popped = await pop_all(client, broker.addr, N, invisible_ms=INVISIBLE_MS)
    assert sorted(m.body for m in popped) == sorted(f"m{i}".encode() for i in range(N))
    acked = popped[::2]  # 500: half one by one, half in batches
    for m in acked[:250]:
        assert (await ack(client, broker.addr, m)).code == ResponseCode.SUCCESS
    for i in range(250, 500, 50):
        assert (await batch_ack(client, broker.addr, acked[i:i + 50])).code == \
            ResponseCode.SUCCESS
    broker.kill()

    await broker.start()
    await accepting_writes(client, broker.addr)
    open_ = popped[1::2]
    late = open_[:50]  # receipts from before the kill, acked after it
    for m in late:
        assert (await ack(client, broker.addr, m)).code == ResponseCode.SUCCESS
    # Short polls: a revived message (V1 retry topic, the default) does not wake a held pop,
    # in 5.3.3 neither; it waits for the next one.
    back = await pop_all(client, broker.addr, len(open_) - len(late), invisible_ms=60_000,
                         poll_ms=100)
    expected = sorted(m.body for m in open_[50:])
    assert sorted(m.body for m in back) == expected  # each once, no acked one
    assert {m.record.reconsume_times for m in back} == {1}
    assert {m.real_topic for m in back} == {f"%RETRY%{GROUP}_{TOPIC}"}
    await batch_ack(client, broker.addr, back)
    # A second revival would be in the retry topic within a revive round or two (100 ms
    # each); the held pop reads the topic and its retry topic again when its 500 ms run out.
    rest = await pop(client, broker.addr, GROUP, TOPIC, invisible_ms=60_000, poll_ms=500,
                     timeout=10)
    assert rest.messages == []  # nothing popped again from the topic, nothing revived twice
