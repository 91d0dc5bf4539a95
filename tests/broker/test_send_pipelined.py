"""Sends read together (one segment holding many frames) take the broker's many-sends path:
answers in request order, refusals and bad headers answered alone, and the stored messages
the same as when sent one at a time."""

from __future__ import annotations

import asyncio

from engine.broker.controller import BrokerController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import FLAG_ONEWAY, RemotingCommand, encode, request
from engine.protocol.frame import FrameDecoder
from engine.protocol.message import decode_records
from engine.remoting.address import parse_addr
from engine.remoting.client import RemotingClient

from .helpers import pull_request, send_request


async def exchange(addr: str, cmds: list[RemotingCommand], answers: int) -> list[RemotingCommand]:
    """Write every frame with one write; read `answers` responses."""
    host, port = parse_addr(addr)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"".join(encode(c.with_opaque(i + 1)) for i, c in enumerate(cmds)))
        decoder, got = FrameDecoder(), []
        while len(got) < answers:
            data = await asyncio.wait_for(reader.read(65536), 10)
            assert data, "the broker closed the connection"
            got += decoder.feed(data)
        return got
    finally:
        writer.close()
        await writer.wait_closed()


async def test_pipelined_sends_are_answered_in_order(broker: BrokerController,
                                                     client: RemotingClient) -> None:
    addr = broker.addr
    oneway = send_request("Pipe", b"oneway", queue_id=1)
    oneway = RemotingCommand(code=oneway.code, flag=FLAG_ONEWAY, ext_fields=oneway.ext_fields,
                             body=oneway.body)
    no_topic = send_request("Pipe", b"x")
    assert no_topic.ext_fields is not None
    no_topic = request(RequestCode.SEND_MESSAGE_V2,
                       {k: v for k, v in no_topic.ext_fields.items() if k != "b"}, b"x")
    cmds = [
        send_request("Pipe", b"m0", tags="a", keys="k0"),  # 1
        send_request("Pipe", b"m1", v2=False),  # 2 (SEND_MESSAGE: its own run)
        send_request("Pipe", b"m2"),  # 3
        send_request("bad topic!", b"x"),  # 4 refused
        no_topic,  # 5 header without a topic
        oneway,  # 6 stored, not answered
        send_request("Pipe", b"m3", extra={"DELAY": "2"}),  # 7 parked in the schedule topic
        send_request("Pipe", b"m4"),  # 8
        pull_request("Pipe", 0, 0),  # 9 sees every message sent before it
        send_request("Pipe", b"m5"),  # 10
    ]
    got = await exchange(addr, cmds, len(cmds) - 1)
    assert [r.opaque for r in got] == [1, 2, 3, 4, 5, 7, 8, 9, 10]
    by = {r.opaque: r for r in got}
    for i in (1, 2, 3, 7, 8, 10):
        assert by[i].code == ResponseCode.SUCCESS, by[i].remark
    assert [by[i].ext("queueOffset") for i in (1, 2, 3, 8, 10)] == ["0", "1", "2", "3", "4"]
    assert by[4].code == ResponseCode.SYSTEM_ERROR and "illegal characters" in (
        by[4].remark or "")
    assert by[5].code == ResponseCode.MESSAGE_ILLEGAL and "'b' (topic) is missing" in (
        by[5].remark or "")
    assert by[9].code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(by[9].body or b"")] == [b"m0", b"m1", b"m2", b"m4"]
    pulled = await client.invoke(addr, pull_request("Pipe", 0, 0))
    records = decode_records(pulled.body or b"")
    assert [r.body for r in records] == [b"m0", b"m1", b"m2", b"m4", b"m5"]
    assert [r.queue_offset for r in records] == [0, 1, 2, 3, 4]
    assert records[0].properties()["KEYS"] == "k0"
    assert records[0].properties()["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in records[0].properties()
    ones = await client.invoke(addr, pull_request("Pipe", 1, 0))
    assert [r.body for r in decode_records(ones.body or b"")] == [b"oneway"]
    delayed = await client.invoke(addr, pull_request("SCHEDULE_TOPIC_XXXX", 1, 0))
    assert [r.body for r in decode_records(delayed.body or b"")] == [b"m3"]
    found = await client.invoke(addr, request(RequestCode.QUERY_MESSAGE, {
        "topic": "Pipe", "key": "k0", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(2**62)}))
    assert [r.body for r in decode_records(found.body or b"")] == [b"m0"]


async def test_a_guard_refusal_inside_a_run_of_sends(broker: BrokerController,
                                                     client: RemotingClient) -> None:
    seen: list[bytes | None] = []

    def guard(cmd: RemotingCommand, addr: str) -> RemotingCommand | None:
        seen.append(cmd.body)
        return cmd.response(ResponseCode.NO_PERMISSION, "denied") if cmd.body == b"deny" else None

    broker.server.set_guard(guard)
    try:
        bodies = [b"g0", b"deny", b"g1", b"g2", b"deny"]
        got = await exchange(broker.addr, [send_request("Guarded", b) for b in bodies], 5)
    finally:
        broker.server.set_guard(None)
    assert seen == bodies  # each request checked once, in order
    assert [r.opaque for r in got] == [1, 2, 3, 4, 5]
    assert [r.code for r in got] == [ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION,
                                      ResponseCode.SUCCESS, ResponseCode.SUCCESS,
                                      ResponseCode.NO_PERMISSION]
    pulled = await client.invoke(broker.addr, pull_request("Guarded", 0, 0))
    assert [r.body for r in decode_records(pulled.body or b"")] == [b"g0", b"g1", b"g2"]
