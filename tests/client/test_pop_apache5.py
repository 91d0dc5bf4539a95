"""Our POP consumer against Apache 5.3.3's broker (opt-in, APACHE_RMQ5_HOME): the receipts it
builds are the ones Apache's broker acks, and a message it fails too often is dead-lettered the
same on Apache's broker and on ours."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.pop_consumer import PopConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message, MessageExt
from engine.client.core.pop_calls import AckStatus
from engine.client.core.results import ConsumeConcurrentlyStatus
from engine.client.produce.producer import Producer
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.codes import ResponseCode
from engine.protocol.message import decode_records
from engine.remoting.client import RemotingClient
from tests.apache5 import CLUSTER, Apache5, apache5, needs_apache5
from tests.broker.helpers import pull_request
from tests.client.conftest import BrokerFactory, make_topic
from tests.mqadmin.cli import invoke

pytestmark = [needs_apache5, pytest.mark.timeout(240)]
__all__ = ["apache5"]
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _sent(ns: str, topic: str, n: int) -> set[str]:
    made = await asyncio.to_thread(invoke, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2",
                                   "-w", "2", "-n", ns, "--yes")
    assert made.exit_code == 0, made.stderr
    producer = Producer("PG_POP", ClientConfig(namesrv_addr=ns))
    await producer.start()
    try:
        return {(await producer.send(Message(topic, f"m{i}".encode()))).msg_id
                for i in range(n)}
    finally:
        await producer.shutdown()


async def _popped(c: PopConsumer, n: int, deadline_s: float = 30.0) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < deadline:
        got += await c.receive(poll_ms=2000)
    return got


async def test_pop_ack_change_and_redelivery_on_apache(apache5: Apache5):
    sent = await _sent(apache5.ns, "PopT1", 6)
    c = PopConsumer("CG_POP_A", ClientConfig(namesrv_addr=apache5.ns),
                    options=PopOptions(consume_from_where=FIRST, invisible_time_millis=3000))
    c.subscribe("PopT1")
    await c.start()
    try:
        msgs = await _popped(c, 6)
        assert {m.msg_id for m in msgs} == sent
        assert await c.ack(msgs[0]) is AckStatus.OK
        assert await c.batch_ack(msgs[1:4]) is AckStatus.OK
        longer = await c.change_invisible_time(msgs[4], 60_000)
        assert await c.ack(longer) is AckStatus.OK
        # msgs[5] is neither acked nor extended: it comes back, reconsumed once.
        again = await _popped(c, 1, 60)
        assert [m.msg_id for m in again] == [msgs[5].msg_id]
        assert again[0].reconsume_times == 1 and again[0].topic == "PopT1"
        assert await c.ack(again[0]) is AckStatus.OK
    finally:
        await c.shutdown()


async def test_listening_consumer_acks_what_it_consumed_on_apache(apache5: Apache5):
    sent = await _sent(apache5.ns, "PopT2", 50)
    seen: set[str] = set()
    done = asyncio.Event()

    def listener(m):
        seen.add(m.msg_id)
        if seen >= sent:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PopConsumer("CG_POP_B", ClientConfig(namesrv_addr=apache5.ns),
                    options=PopOptions(consume_from_where=FIRST, poll_time_millis=1000))
    c.subscribe("PopT2")
    await c.start()
    try:
        c.listen(listener)
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await c.shutdown()
    progress = await asyncio.to_thread(invoke, "consumerProgress", "-g", "CG_POP_B", "-t",
                                       "PopT2", "-n", apache5.ns, "-o", "json")
    assert progress.exit_code == 0, progress.stderr


async def _dead_letter(ns: str, broker_addr: str, topic: str, group: str
                       ) -> tuple[list[int], dict[str, object]]:
    """A PopConsumer whose listener always fails (max_reconsume_times 1): the reconsume times
    it saw and the %DLQ% record it made, described without the run's ids and times."""
    producer = Producer("PG_POP_DEAD", ClientConfig(namesrv_addr=ns))
    await producer.start()
    try:
        await producer.send(Message(topic, b"poison", tags="TagA", keys="KeyA",
                                    properties={"k": "v"}))
    finally:
        await producer.shutdown()
    attempts: list[int] = []

    def listener(m: MessageExt) -> ConsumeConcurrentlyStatus:
        attempts.append(m.reconsume_times)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    c = PopConsumer(group, ClientConfig(namesrv_addr=ns), options=PopOptions(
        consume_from_where=FIRST, poll_time_millis=1000, retry_backoff_millis=100,
        max_reconsume_times=1))
    c.subscribe(topic)
    await c.start()
    remoting = RemotingClient()
    try:
        c.listen(listener)
        async with asyncio.timeout(120):
            while True:
                resp = await remoting.invoke(broker_addr, pull_request(
                    f"%DLQ%{group}", 0, 0, group=group), timeout=10)
                if resp.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.2)
    finally:
        await remoting.close()
        await c.shutdown()
    (dead,) = decode_records(resp.body or b"")
    volatile = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "1ST_POP_TIME", "MSG_REGION", "TRACE_ON",
                "CLUSTER", "MIN_OFFSET", "MAX_OFFSET"}
    props = {k: ("..." if k in volatile else v.replace(group, "G").replace(topic, "T"))
             for k, v in dead.properties().items() if k not in ("MSG_REGION", "TRACE_ON")}
    return attempts, {"reconsume": dead.reconsume_times, "body": dead.body, "props": props}


async def test_a_failing_listener_dead_letters_as_on_ours(
        apache5: Apache5, start_broker: BrokerFactory, client_config: ClientConfig) -> None:
    """The same dead letter from Apache's broker and ours: its revive puts the message back
    into the pop retry topic, the consumer sends it to the DLQ when it pops it past its count
    (MSG_REGION and TRACE_ON aside: docs/proxy.md "What differs")."""
    made = await asyncio.to_thread(invoke, "updateTopic", "-c", CLUSTER, "-t", "PopDead",
                                   "-r", "1", "-w", "1", "-n", apache5.ns, "--yes")
    assert made.exit_code == 0, made.stderr
    theirs = await _dead_letter(apache5.ns, apache5.broker, "PopDead", "CG_POP_DEAD")
    broker = await start_broker()
    await make_topic(broker, "PopDead", 1)
    assert client_config.namesrv_addr is not None
    ours = await _dead_letter(client_config.namesrv_addr, broker.addr, "PopDead",
                              "CG_POP_DEAD")
    print("ours", ours, "\ntheirs", theirs)
    assert theirs[0] == [0, 1] and theirs[1]["reconsume"] == 3
    assert ours == theirs
