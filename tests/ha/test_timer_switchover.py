"""Timer messages across a switchover: the slave keeps its own timer log and wheel from the
replicated commit log and follows the master's progress (GET_TIMER_CHECK_POINT); promoted in
the middle of the deliveries, it delivers the rest, none twice."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import decode_record
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from engine.store.timer.checkpoint import TimerCheckpoint
from tests.broker.conftest import call
from tests.broker.helpers import send_request
from tests.ha.inproc import MakeBroker, until
from tests.mqadmin.cli import invoke

TOPIC = "TimedHa"
#: The timer wheel's slot (timerPrecisionMs), 100 ms instead of 1 s: the last slot closes
#: 100 ms after its time.
PRECISION_MS = 100
#: The deliveries: the first half a second after the sends, the last SPREAD_MS later; the
#: switchover starts once an eighth of them are out, leaving it 2.6 s of deliveries to
#: happen in (as long as the 4 s schedule switched over at a third had).
SPREAD_MS = 3_000


async def test_switchover_in_the_middle_of_deliveries_delivers_each_timer_once(
        tmp_path: Path, make_broker: MakeBroker, namesrv: NamesrvController,
        client: RemotingClient) -> None:
    a = await make_broker("a", timer_precision_ms=PRECISION_MS)
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE,
                          timer_precision_ms=PRECISION_MS)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    count = 400
    first = int(time.time() * 1000) + 500
    for i in range(count):
        deliver_at = first + i * SPREAD_MS // count
        resp = await client.invoke(a.addr, send_request(
            TOPIC, str(i).encode(), queue_id=0, extra={"TIMER_DELIVER_MS": str(deliver_at)}))
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    # the slave parks them too, and follows the master's progress
    await until(lambda: b.state.store.timer.queue_offset == count)
    answer = await call(client, a.addr, RequestCode.GET_TIMER_CHECK_POINT)
    assert answer.code == ResponseCode.SUCCESS
    assert TimerCheckpoint.decode(answer.body or b"").read_ms > 0

    store_a = a.state.store
    await until(lambda: store_a.get_max_offset_in_queue(TOPIC, 0) >= count // 8, 15)
    ns = f"127.0.0.1:{namesrv.port}"
    # the CLI in this process (a thread): no interpreter start between the trigger and the
    # switchover, which happens among the deliveries however busy the machine
    done = await asyncio.to_thread(invoke, "switchover", "-n", ns, "-b", "broker-a", "--yes",
                                   env={"MQADMIN_HOME": str(tmp_path / "mqadmin")})
    assert done.exit_code == 0, done.stderr
    assert not b.state.is_slave and a.state.is_slave
    store_b = b.state.store
    await until(lambda: store_b.get_max_offset_in_queue(TOPIC, 0) >= count, 15)
    last_slot_done = first + SPREAD_MS + PRECISION_MS  # the last timer's slot has closed
    await until(lambda: store_b.timer.commit_read_ms > last_slot_done, 10)
    assert store_b.timer.congest_num_total() == 0

    seen: Counter[int] = Counter()
    for q in range(store_b.get_max_offset_in_queue(TOPIC, 0)):
        entry = store_b.get_queue_entry(TOPIC, 0, q)
        assert entry is not None
        data = store_b.look_message_by_offset(entry[0], entry[1])
        assert data is not None
        seen[int(decode_record(data).body)] += 1
    assert sorted(seen) == list(range(count))
    assert [i for i, n in seen.items() if n > 1] == []
