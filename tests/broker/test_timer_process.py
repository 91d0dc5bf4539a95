"""Timer messages on a broker in its own process: 10,000 timers spread over a minute, each
delivered within a second of its time; SIGKILL while they are being delivered loses none and
delivers none twice."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.message import MessageRecord, decode_records
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError
from tests.conftest import addr_of
from tests.ha.procs import BrokerProcess, brokers  # noqa: F401  (the fixture)

from .helpers import pull_request, send_request

TOPIC = "TimerProc"
SETTINGS = {"brokerClusterName": "TimerCluster",
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024)}


def now_ms() -> int:
    return int(time.time() * 1000)


async def send_timers(client: RemotingClient, addr: str, deliver_at: list[int]) -> None:
    """Send one timer per entry (body = its index), 256 in flight; every one acknowledged."""
    async def one(i: int) -> None:
        cmd = send_request(TOPIC, str(i).encode(), queue_id=0,
                           extra={"TIMER_DELIVER_MS": str(deliver_at[i])})
        resp = await client.invoke(addr, cmd, timeout=30)
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    for start in range(0, len(deliver_at), 256):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 256, len(deliver_at)))))


async def pull_from(client: RemotingClient, addr: str, offset: int) -> list[MessageRecord]:
    try:
        resp = await client.invoke(addr, pull_request(TOPIC, 0, offset, max_nums=32,
                                                      suspend_ms=500), timeout=5)
    except (RemotingError, OSError, TimeoutError):
        return []
    if resp.code != ResponseCode.SUCCESS:
        return []
    return decode_records(resp.body or b"")


async def collect(client: RemotingClient, broker: BrokerProcess, records: list[MessageRecord],
                  until: int, want: int) -> None:
    """Pull queue 0 from where `records` ends until `want` records or `until` (epoch ms)."""
    while len(records) < want and now_ms() < until:
        got = await pull_from(client, broker.addr, len(records))
        if not got:
            await asyncio.sleep(0.05)
        records.extend(got)


async def test_ten_thousand_timers_over_a_minute_each_within_a_second(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        brokers: list[BrokerProcess]) -> None:  # noqa: F811
    broker = BrokerProcess(tmp_path, "timers", addr_of(namesrv), **SETTINGS)
    brokers.append(broker)
    await broker.start()
    count = 10_000
    first = now_ms() + 5_000
    deliver_at = [first + i * 60_000 // count for i in range(count)]
    await send_timers(client, broker.addr, deliver_at)
    records: list[MessageRecord] = []
    await collect(client, broker, records, deliver_at[-1] + 10_000, count)

    assert sorted(int(r.body) for r in records) == list(range(count))
    late = [r.store_timestamp - deliver_at[int(r.body)] for r in records]
    assert min(late) >= 0, "delivered before its time"
    assert max(late) <= 1_000, f"delivered {max(late)} ms late"
    for r in records[:10]:
        props = r.properties()
        assert props["TIMER_OUT_MS"] and props["TIMER_DEQUEUE_MS"] and props["TIMER_ENQUEUE_MS"]
        assert props["REAL_TOPIC"] == TOPIC


async def timers_pending(client: RemotingClient, addr: str) -> int:
    """Timers the broker has yet to deliver: not yet in its wheel (timerOffsetBehind) plus
    waiting in it or taken and not yet put (timerCongestNum); -1 while it does not answer."""
    try:
        resp = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO),
                                   timeout=5)
    except (RemotingError, OSError, TimeoutError):
        return -1
    table = json.loads(resp.body or b"{}")["table"]
    return int(table["timerOffsetBehind"]) + int(table["timerCongestNum"])


async def test_sigkill_while_delivering_loses_none_and_doubles_none(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
        brokers: list[BrokerProcess]) -> None:  # noqa: F811
    broker = BrokerProcess(tmp_path, "crash", addr_of(namesrv), **SETTINGS)
    brokers.append(broker)
    await broker.start()
    count = 3_000
    first = now_ms() + 1_000  # sending takes a fraction of that; a late one is due at once
    deliver_at = [first + i * 2_000 // count for i in range(count)]
    await send_timers(client, broker.addr, deliver_at)
    records: list[MessageRecord] = []
    await collect(client, broker, records, deliver_at[-1] + 10_000, count // 3)
    assert count // 3 <= len(records) < count, "kill in the middle of the deliveries"
    broker.kill()
    await broker.start()
    await collect(client, broker, records, deliver_at[-1] + 20_000, count)
    # A second round of deliveries (the restart replaying what it had already delivered)
    # would be pending in the wheel or the timer queue: wait until nothing is, then look
    # once more, briefly, for anything put since.
    deadline = now_ms() + 30_000
    while await timers_pending(client, broker.addr) != 0 and now_ms() < deadline:
        await asyncio.sleep(0.05)
    await collect(client, broker, records, now_ms() + 500, count + 1)

    seen = Counter(int(r.body) for r in records)
    assert sorted(seen) == list(range(count)), "lost timers"
    assert [i for i, n in seen.items() if n > 1] == [], "timers delivered twice"
