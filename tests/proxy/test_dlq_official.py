"""A NORMAL message past its retry policy, with the official Python SimpleConsumer through
`mqbroker --enable-proxy`: nacked at each of its attempts (retryMaxTimes 1: two), it is put
back into the pop retry topic once more by the revive and the receive that pops it next sends
it to %DLQ%<group> instead of delivering it, with what 5.3.3 stores there
(tests/proxy/test_apache5_dlq.py compares the two); it is not delivered again."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import ClientError
from engine.client.core.namesrv import NamesrvAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import MessageRecord, decode_records
from engine.remoting.client import RemotingClient
from tests.broker.conftest import call
from tests.broker.helpers import pull_request
from tests.broker.test_main import write_conf
from tests.proxy.conftest import in_thread
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from tests.proxy.test_main import STARTUP_S, proxy_json, serve_until_line

pytestmark = pytest.mark.timeout(300)

TOPIC, GROUP = "DeadNormal", "DeadNormalGroup"
DLQ, RETRY = f"%DLQ%{GROUP}", f"%RETRY%{GROUP}_{TOPIC}"
#: The consumer's long polls: the proxy's minimum lowered to 1 s (5.3.3's is 5 s), so the
#: receives that find nothing (the revive not done yet: a held pop is not woken for a V1 pop
#: retry topic, as on 5.3.3) end a second later.
AWAIT_S = 1
#: How long the message may take to reach the DLQ (two nacks, two revives; a busy machine).
DEAD_BY_S = 60
#: Properties whose values are the run's own (ids, times); only their presence counts.
VOLATILE = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "1ST_POP_TIME", "BORN_TIMESTAMP", "__BORNHOST"}


async def _broker_addr(admin: NamesrvAdmin) -> str:
    for _ in range(200):
        brokers = (await admin.cluster_info()).broker_addr_table.values()
        addrs = [a for a in (b.master_addr() for b in brokers) if a]
        if addrs:
            return addrs[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the broker never registered")


async def _prepare(ns: str, remoting: RemotingClient) -> str:
    """TOPIC (routed) and GROUP with retryMaxTimes 1 on the one broker; its address."""
    admin = NamesrvAdmin(ns)
    try:
        addr = await _broker_addr(admin)
        await BrokerAdmin(remoting).create_topic(addr, TopicConfig(TOPIC, 1, 1))
        made = await call(remoting, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=b'{"groupName":"%s","consumeEnable":true,"retryMaxTimes":1}'
                          % GROUP.encode())
        assert made.code == ResponseCode.SUCCESS, made.remark
        for _ in range(200):  # the broker registers the new topic in the background
            try:
                await admin.topic_route(TOPIC)
                return addr
            except ClientError:
                await asyncio.sleep(0.05)
        raise AssertionError(f"{TOPIC} never routed")
    finally:
        await admin.close()


async def _dead(remoting: RemotingClient, addr: str) -> list[MessageRecord]:
    resp = await remoting.invoke(addr, pull_request(DLQ, 0, 0, group=GROUP), timeout=10)
    return decode_records(resp.body or b"") if resp.code == ResponseCode.SUCCESS else []


async def _send(endpoint: str) -> str:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body, msg.tag, msg.keys = TOPIC, b"poison", "TagA", "KeyA"
        msg.add_property("k", "v")
        receipt = await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    return str(receipt.message_id)


async def test_a_normal_message_past_its_policy_is_dead_lettered_as_5_3_3_does(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    # a revive round every 200 ms and no idle stretching (defaults 1 s, up to 3 s)
    conf = write_conf(tmp_path, namesrvAddr=ns, reviveInterval="200", reviveMaxSlow="1")
    pc = proxy_json(tmp_path, grpcClientConsumerMinLongPollingTimeoutMillis=AWAIT_S * 1000)
    proc, line = await serve_until_line(
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(pc)], tmp_path, "gRPC proxy boot success")
    remoting = RemotingClient()
    consumer: SimpleConsumer | None = None
    try:
        endpoint = line.rsplit(" ", 1)[1].strip()
        addr = await _prepare(ns, remoting)
        consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials()), GROUP,
                                  {TOPIC: FilterExpression("*")}, await_duration=AWAIT_S)
        await in_thread(consumer.startup)
        msg_id = await _send(endpoint)
        attempts: list[int] = []
        dead: list[MessageRecord] = []
        # Each receive returns with the message, or when the one that pops it past its
        # attempts has sent it to the DLQ, or at its await time (the revive not yet done).
        deadline = asyncio.get_running_loop().time() + DEAD_BY_S
        while asyncio.get_running_loop().time() < deadline:
            for got in await in_thread(consumer.receive, 1, 10):
                attempts.append(got.delivery_attempt)
                await in_thread(consumer.change_invisible_duration, got, 1)  # a nack
            dead = await _dead(remoting, addr)
            if dead:
                break
        assert attempts == [1, 2]
        (record,) = dead
        # not delivered again: nothing to pop for a whole await time after the DLQ
        assert await in_thread(consumer.receive, 1, 10) == []
        assert attempts == [1, 2]
    finally:
        if consumer is not None:
            await in_thread(consumer.shutdown)
        await remoting.close()
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STARTUP_S)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    props = record.properties()
    assert props["UNIQ_KEY"] == msg_id and props["ORIGIN_MESSAGE_ID"] != msg_id
    assert (record.topic, record.queue_id, record.body) == (DLQ, 0, b"poison")
    # the revive put it back once more (reconsume times 2), the send-back once again
    assert record.reconsume_times == 3
    # 5.3.3's (tests/proxy/test_apache5_dlq.py), less MSG_REGION and TRACE_ON (docs/proxy.md)
    assert {k: ("..." if k in VOLATILE else v) for k, v in props.items()} == {
        "1ST_POP_TIME": "...", "BORN_TIMESTAMP": "...", "CLUSTER": "DefaultCluster",
        "DELAY": "0", "KEYS": "KeyA", "ORIGIN_MESSAGE_ID": "...", "PGROUP": TOPIC,
        "RECONSUME_TIME": "0", "RETRY_TOPIC": RETRY, "TAGS": "TagA", "UNIQ_KEY": "...",
        "WAIT": "false", "__BORNHOST": "...", "k": "v"}
