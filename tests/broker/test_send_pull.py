"""Send, pull, long polling, offsets and queries through the real protocol."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import decode_offset_msg_id, decode_records
from engine.protocol.perm import PERM_RW
from engine.remoting.client import RemotingClient

from .conftest import call, pull_all, running_broker
from .helpers import pull_request, send_request


async def test_send_then_pull_returns_exactly_what_was_sent(broker: BrokerController,
                                                           client: RemotingClient) -> None:
    addr = broker.addr
    sent = []
    for i, v2 in enumerate([True, False, True]):
        resp = await client.invoke(addr, send_request(
            "Orders", f"body-{i}".encode(), queue_id=1, tags="TagA", keys=f"k{i} order-{i}",
            v2=v2, extra={"color": "blue"}))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        ext = resp.ext_fields or {}
        assert {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"} <= set(ext)
        assert ext["queueId"] == "1" and ext["queueOffset"] == str(i)
        assert ext["MSG_REGION"] == "DefaultRegion"
        sent.append(ext["msgId"])
    resp = await client.invoke(addr, pull_request("Orders", 1, 0))
    assert resp.code == ResponseCode.SUCCESS
    assert resp.remark == "FOUND"
    assert resp.ext_fields is not None
    assert resp.ext_fields["nextBeginOffset"] == "3"
    assert resp.ext_fields["minOffset"] == "0" and resp.ext_fields["maxOffset"] == "3"
    assert resp.ext_fields["suggestWhichBrokerId"] == "0"
    records = decode_records(resp.body or b"")
    assert [r.body for r in records] == [b"body-0", b"body-1", b"body-2"]
    assert [r.queue_offset for r in records] == [0, 1, 2]
    props = records[0].properties()
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k0 order-0"
    assert props["color"] == "blue" and props["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in props
    assert records[0].topic == "Orders"
    host, phy = decode_offset_msg_id(sent[1])
    assert phy == records[1].physical_offset
    assert host[1] == broker.port


async def test_pull_statuses(broker: BrokerController, client: RemotingClient) -> None:
    addr = broker.addr
    await client.invoke(addr, send_request("T1", b"x", queue_id=0))
    empty = await client.invoke(addr, pull_request("T1", 1, 0))
    assert empty.code == ResponseCode.PULL_NOT_FOUND
    assert empty.ext_fields and empty.ext_fields["nextBeginOffset"] == "0"
    at_end = await client.invoke(addr, pull_request("T1", 0, 1))
    assert at_end.code == ResponseCode.PULL_NOT_FOUND and at_end.remark == "OFFSET_OVERFLOW_ONE"
    badly = await client.invoke(addr, pull_request("T1", 0, 50))
    assert badly.code == ResponseCode.PULL_OFFSET_MOVED
    # 4.9.7 corrects an overflowing offset to the min offset while the queue still starts at 0.
    assert badly.ext_fields and badly.ext_fields["nextBeginOffset"] == "0"
    tagged = await client.invoke(addr, pull_request("T1", 0, 0, subscription="Other"))
    assert tagged.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    unknown = await client.invoke(addr, pull_request("Nope", 0, 0))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    bad_queue = await client.invoke(addr, pull_request("T1", 99, 0))
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in (
        bad_queue.remark or "")


async def test_long_polling_wakes_when_a_message_arrives(broker: BrokerController,
                                                         client: RemotingClient) -> None:
    addr = broker.addr
    await client.invoke(addr, send_request("Poll", b"first"))
    held = asyncio.ensure_future(client.invoke(addr, pull_request("Poll", 0, 1, suspend_ms=30_000),
                                               timeout=60))
    await asyncio.sleep(0)
    assert not held.done()
    other = RemotingClient()
    try:
        await other.invoke(addr, send_request("Poll", b"second"))
    finally:
        await other.close()
    resp = await asyncio.wait_for(held, 20)
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(resp.body or b"")] == [b"second"]


async def test_long_poll_times_out_with_not_found(broker: BrokerController,
                                                  client: RemotingClient) -> None:
    addr = broker.addr
    await client.invoke(addr, send_request("Quiet", b"only"))
    resp = await client.invoke(addr, pull_request("Quiet", 0, 1, suspend_ms=50))
    assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_consumer_offsets(broker: BrokerController, client: RemotingClient) -> None:
    addr = broker.addr
    await client.invoke(addr, send_request("Off", b"a"))
    query = {"consumerGroup": "NewGroup", "topic": "Off", "queueId": "0"}
    first = await call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert first.code == ResponseCode.SUCCESS and first.ext_fields == {"offset": "0"}
    update = {**query, "commitOffset": "1"}
    assert (await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
    again = await call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert again.ext_fields == {"offset": "1"}
    await client.invoke(addr, pull_request("Off", 0, 1, group="PullGroup", commit_offset=1))
    pulled = await call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                        {**query, "consumerGroup": "PullGroup"})
    assert pulled.ext_fields == {"offset": "1"}
    q = {"topic": "Off", "queueId": "0"}
    assert (await call(client, addr, RequestCode.GET_MAX_OFFSET, q)).ext_fields == {"offset": "1"}
    assert (await call(client, addr, RequestCode.GET_MIN_OFFSET, q)).ext_fields == {"offset": "0"}
    earliest = await call(client, addr, RequestCode.GET_EARLIEST_MSG_STORETIME, q)
    ts = int((earliest.ext_fields or {})["timestamp"])
    assert ts > 0
    found = await call(client, addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                       {**q, "timestamp": str(ts)})
    assert found.ext_fields == {"offset": "0"}


async def test_query_by_key_and_view_by_id(broker: BrokerController,
                                           client: RemotingClient) -> None:
    addr = broker.addr
    resp = await client.invoke(addr, send_request("Q", b"payload", keys="order-42"))
    msg_id = (resp.ext_fields or {})["msgId"]
    found = await call(client, addr, RequestCode.QUERY_MESSAGE, {
        "topic": "Q", "key": "order-42", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(2**62)})
    assert found.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(found.body or b"")] == [b"payload"]
    missing = await call(client, addr, RequestCode.QUERY_MESSAGE, {
        "topic": "Q", "key": "nothing", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(2**62)})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    _, phy = decode_offset_msg_id(msg_id)
    view = await call(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
    assert decode_records(view.body or b"")[0].body == b"payload"
    gone = await call(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(10**9)})
    assert gone.code == ResponseCode.SYSTEM_ERROR


async def test_send_refusals(broker: BrokerController, client: RemotingClient) -> None:
    addr = broker.addr
    bad_name = await client.invoke(addr, send_request("bad topic!", b"x"))
    assert bad_name.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in (
        bad_name.remark or "")
    reserved = await client.invoke(addr, send_request("SCHEDULE_TOPIC_XXXX", b"x"))
    assert reserved.code == ResponseCode.NO_PERMISSION
    bad_queue = await client.invoke(addr, send_request("Orders2", b"x", queue_id=99))
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR
    huge = await client.invoke(addr, send_request("Orders2", b"x" * (4 * 1024 * 1024 + 1)))
    assert huge.code == ResponseCode.MESSAGE_ILLEGAL
    delayed_tx = await client.invoke(addr, send_request(
        "Orders2", b"x", extra={"DELAY": "3", "TRAN_MSG": "true", "PGROUP": "PG"}))
    assert delayed_tx.code == ResponseCode.MESSAGE_ILLEGAL and "delay level" in (
        delayed_tx.remark or "")
    ok = await client.invoke(addr, send_request("Orders2", b"fine"))
    assert ok.code == ResponseCode.SUCCESS


async def test_retry_topic_past_max_times_goes_to_dlq(broker: BrokerController,
                                                      client: RemotingClient) -> None:
    addr = broker.addr
    broker.state.groups.find_or_create("CG")
    resp = await client.invoke(addr, send_request("%RETRY%CG", b"dead", reconsume_times=16))
    assert resp.code == ResponseCode.SUCCESS
    dlq = broker.state.topics.get("%DLQ%CG")
    assert dlq is not None and (dlq.read_queue_nums, dlq.perm) == (1, PERM_RW)  # as 4.9.2+
    pulled = await client.invoke(addr, pull_request("%DLQ%CG", 0, 0))
    assert pulled.code == ResponseCode.SUCCESS  # readable: the dead-letter tools pull it
    found = broker.state.store.get_message("admin", "%DLQ%CG", 0, 0, 1)
    assert decode_records(found.messages[0])[0].body == b"dead"


async def test_a_body_of_exactly_max_message_size_is_stored(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    """As Apache 4.9.8 and 5.3.3: maxMessageSize limits the body (the record may be 64 KiB
    more), so a 4 MiB body with 16 KiB of properties is stored and read back; one byte more
    is MESSAGE_ILLEGAL with their remark."""
    body = bytes(range(256)) * (4 * 1024 * 1024 // 256)
    async with running_broker(tmp_path, namesrv,
                              mapped_file_size_commit_log=16 * 1024 * 1024) as broker:
        at_limit = await client.invoke(broker.addr, send_request(
            "Big", body, queue_id=0, extra={"big": "v" * (16 * 1024)}))
        assert at_limit.code == ResponseCode.SUCCESS, at_limit.remark
        over = await client.invoke(broker.addr, send_request("Big", body + b"x", queue_id=0))
        assert (over.code, over.remark) == (ResponseCode.MESSAGE_ILLEGAL, (
            "the message is illegal, maybe msg body or properties length not matched. msg body "
            "length limit 4194304B, msg properties length limit 32KB."))
        [record] = await pull_all(client, broker, "Big", 0)
        assert record.body == body
