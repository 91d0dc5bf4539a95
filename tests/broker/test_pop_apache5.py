"""One POP scenario on Apache 5.3.3's broker and on ours, over plain remoting: the same answers,
headers, receipts, redelivery, FIFO order counts and revive-topic records (opt-in:
APACHE_RMQ5_HOME)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.protocol.header.broker import PullMessageRequestHeader
from engine.protocol.header.pop import PeekMessageRequestHeader
from engine.protocol.message import decode_records
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from tests.apache5 import BROKER, CLUSTER, Apache5, apache5, needs_apache5
from tests.mqadmin.cli import invoke
from tests.sending import send_one

from .conftest import running_broker
from .pop_calls import ack, change_invisible, notification_request, pop

pytestmark = [needs_apache5, pytest.mark.timeout(300)]
__all__ = ["apache5"]
#: The properties POP adds to a message it hands out again (senders add others of their own).
POP_PROPERTIES = {"1ST_POP_TIME", "POP_CK"}


async def scenario(client: RemotingClient, addr: str, broker_name: str, topic: str,
                   fifo: str) -> dict[str, Any]:
    """What a broker answers to one POP session, with names and times left out."""
    out: dict[str, Any] = {}
    for i in range(3):
        await send_one(client, addr, broker_name, topic, b"m%d" % i, tags="TagA")
    first = await pop(client, addr, "CG1", topic, init_mode=1, invisible_ms=6000,
                      broker_name=broker_name)
    h = first.header
    assert h is not None
    out["pop"] = (first.code, first.remark, [m.body for m in first.messages], h.invisible_time,
                  h.rest_num, h.start_offset_info, h.msg_offset_info, h.order_count_info)
    m0, m1, _ = first.messages
    out["ack"] = [(await ack(client, addr, m)).code for m in (m0, m0)]
    bad = replace(m1, record=replace(m1.record, queue_offset=99))
    out["ack_out_of_queue"] = (await ack(client, addr, bad)).code
    resp, changed = await change_invisible(client, addr, m1, 5000)
    out["change"] = (resp.code, sorted((resp.ext_fields or {}).keys()),
                     changed.receipt.invisible_time if changed else None)
    out["too_many"] = (await pop(client, addr, "CG1", topic, max_nums=33)).code
    out["bad_queue"] = (await pop(client, addr, "CG1", topic, queue_id=9)).code
    empty = await pop(client, addr, "CG1", topic, poll_ms=300)
    out["empty"] = (empty.code, empty.remark)
    notified = await client.invoke(addr, notification_request("CG1", topic, poll_ms=200), 5)
    out["notification"] = (notified.code, notified.ext_fields)
    peeked = await client.invoke(addr, request(RequestCode.PEEK_MESSAGE, to_ext(
        PeekMessageRequestHeader(topic=topic, queue_id=0, max_msg_nums=32,
                                 consumer_group="CG1"))), 5)
    out["peek"] = (peeked.code, peeked.remark, peeked.ext_fields)
    back = []
    async with asyncio.timeout(40):
        while len(back) < 2:
            got = await pop(client, addr, "CG1", topic, poll_ms=2000, invisible_ms=60_000,
                            timeout=10)
            back += got.messages
    out["back"] = sorted((m.body, m.record.reconsume_times, m.record.topic, m.receipt.retry,
                          sorted(POP_PROPERTIES & set(m.record.properties()))) for m in back)
    # FIFO: a second attempt waits, then counts each message once more
    for i in range(3):
        await send_one(client, addr, broker_name, fifo, b"f%d" % i)
    a = await pop(client, addr, "FG", fifo, max_nums=2, order=True, attempt_id="A",
                  invisible_ms=1000, init_mode=0)
    blocked = await pop(client, addr, "FG", fifo, order=True, attempt_id="B", init_mode=0)
    await asyncio.sleep(1.2)
    b = await pop(client, addr, "FG", fifo, max_nums=2, order=True, attempt_id="B",
                  init_mode=0, invisible_ms=20_000)
    assert a.header is not None and b.header is not None
    out["fifo"] = ([m.body for m in a.messages], a.header.revive_qid,
                   a.header.order_count_info, blocked.code, [m.body for m in b.messages],
                   b.header.order_count_info)
    out["fifo_acks"] = [(await ack(client, addr, m)).code for m in reversed(b.messages)]
    # the revive topic's first records: their tags, JSON keys and unique-id shapes
    pulled = await client.invoke(addr, request(RequestCode.PULL_MESSAGE, to_ext(
        PullMessageRequestHeader(consumer_group="X", topic=f"rmq_sys_REVIVE_LOG_{CLUSTER}",
                                 queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=0x4,
                                 commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                                 subscription="*", expression_type="TAG"))), 5)
    records = set()
    for rec in decode_records(pulled.body or b""):
        uniq = rec.properties().get("UNIQ_KEY", "").split("@")
        records.add((rec.properties().get("TAGS"), tuple(sorted(orjson.loads(rec.body))),
                     len(uniq), uniq[-1]))
    out["revive_records"] = sorted(records)
    return out


async def test_same_pop_session_on_apache_and_ours(apache5: Apache5, tmp_path: Path,
                                                   namesrv: NamesrvController,
                                                   client: RemotingClient) -> None:
    topic, fifo = f"PopCmp{int(time.time())}", f"PopFifo{int(time.time())}"
    for name, queues in ((topic, 1), (fifo, 1)):
        made = await asyncio.to_thread(invoke, "updateTopic", "-c", CLUSTER, "-t", name,
                                       "-r", str(queues), "-w", str(queues), "-n", apache5.ns,
                                       "--yes")
        assert made.exit_code == 0, made.stderr
    theirs = await scenario(client, apache5.broker, BROKER, topic, fifo)
    async with running_broker(tmp_path, namesrv, broker_cluster_name=CLUSTER,
                              revive_interval=100) as ours:
        for name in (topic, fifo):
            ours.state.topics.put(TopicConfig(name, 1, 1))
        mine = await scenario(client, ours.addr, "broker-a", topic, fifo)
    assert {tag for tag, *_ in theirs["revive_records"]} == {"ck", "ack"}
    assert [body for body, *_ in theirs["back"]] == [b"m1", b"m2"]
    for key in theirs:
        assert mine[key] == theirs[key], key
