"""Replication wired into brokers (in one process): SYNC_MASTER, slave reads, metadata sync."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.ha.wire import encode_report
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import BatchItem, decode_records, encode_batch_body
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.conftest import call
from tests.broker.helpers import pull_request, send_request
from tests.ha.inproc import MakeBroker, ha_status, until
from tests.ha.stores import assert_same_stores


async def test_sync_master_waits_for_its_slave_which_serves_reads(
        make_broker: MakeBroker, client: RemotingClient) -> None:
    master = await make_broker("m", broker_role=BrokerRole.SYNC_MASTER)
    alone = await client.invoke(master.addr, send_request("Orders", b"alone"))
    assert alone.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored, but no slave has it
    assert (alone.ext_fields or {})["queueOffset"] == "0"
    slave = await make_broker("s", broker_id=1, broker_role=BrokerRole.SLAVE,
                              slave_read_enable=True)
    await until(lambda: bool(master.state.ha and master.state.ha.connections))
    for i in range(20):
        resp = await client.invoke(master.addr, send_request("Orders", f"m{i}".encode()))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        # SUCCESS on a SYNC_MASTER means the slave has the bytes already.
        assert slave.state.store.get_max_phy_offset() >= master.state.store.get_max_phy_offset()
    batch = encode_batch_body([BatchItem(0, b"b%d" % i, "TAGS\x01B") for i in range(5)])
    resp = await client.invoke(master.addr, send_request("Orders", batch, batch=True))
    assert resp.code == ResponseCode.SUCCESS, resp.remark  # batches wait for the slave too
    assert slave.state.store.get_max_phy_offset() == master.state.store.get_max_phy_offset()
    assert_same_stores(master.state.store, slave.state.store)
    await until(lambda: slave.state.topics.get("Orders") is not None)  # metadata sync
    pulled = await client.invoke(slave.addr, pull_request("Orders", 0, 0))
    assert pulled.code == ResponseCode.SUCCESS
    assert len(decode_records(pulled.body or b"")) == 26
    refused = await client.invoke(slave.addr, send_request("Orders", b"x"))
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "slave" in (refused.remark or "") and master.addr in (refused.remark or "")

    status = await ha_status(client, master.addr)
    assert status.master and status.in_sync_slave_nums == 1
    conn = status.ha_connection_info[0]
    assert conn.slave_ack_offset == status.master_commit_log_max_offset and conn.diff == 0
    assert conn.estimated_messages_behind == 0 and conn.connection_age_ms >= 0
    raw = fastjson.loads((await call(client, master.addr,
                                     RequestCode.GET_BROKER_HA_STATUS)).body or b"")
    assert {"master", "masterCommitLogMaxOffset", "inSyncSlaveNums", "haConnectionInfo",
            "haClientRuntimeInfo"} <= set(raw)
    assert {"addr", "slaveAckOffset", "diff", "inSync", "transferredByteInSecond",
            "transferFromWhere"} <= set(raw["haConnectionInfo"][0])
    on_slave = await ha_status(client, slave.addr)
    assert not on_slave.master and on_slave.broker_role == "SLAVE"
    info = on_slave.ha_client_runtime_info
    assert info.is_activated and info.max_offset == status.master_commit_log_max_offset
    assert info.master_addr == master.state.ha_server_addr


async def test_a_broker_on_port_0_serves_its_fast_port_two_below(
        make_broker: MakeBroker, client: RemotingClient) -> None:
    # A slave reads its master's topic table from port - 2 (Apache's SlaveSynchronize): with
    # listenPort 0 that port is found at start, so the slave reaches this broker, no other.
    master = await make_broker("m")
    host, port = master.addr.rsplit(":", 1)
    assert master.fast_server is not None and master.fast_server.port == int(port) - 2
    resp = await client.invoke(f"{host}:{int(port) - 2}", send_request("Fast", b"x"))
    assert resp.code == ResponseCode.SUCCESS
    table = await call(client, f"{host}:{int(port) - 2}", RequestCode.GET_ALL_TOPIC_CONFIG)
    assert b"Fast" in (table.body or b"")


async def test_slave_without_slave_read_enable_sends_pulls_to_the_master(
        make_broker: MakeBroker, client: RemotingClient) -> None:
    master = await make_broker("m")
    slave = await make_broker("s", broker_id=1, broker_role=BrokerRole.SLAVE)
    resp = await client.invoke(master.addr, send_request("T", b"x"))
    assert resp.code == ResponseCode.SUCCESS
    await until(lambda: slave.state.topics.get("T") is not None)
    pulled = await client.invoke(slave.addr, pull_request("T", 0, 0))
    assert pulled.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert (pulled.ext_fields or {})["suggestWhichBrokerId"] == "0"


async def test_stalled_slave_gives_flush_slave_timeout(
        make_broker: MakeBroker, client: RemotingClient) -> None:
    master = await make_broker("m", broker_role=BrokerRole.SYNC_MASTER, slave_timeout=200)
    ha = master.state.ha
    assert ha is not None
    _, writer = await asyncio.open_connection("127.0.0.1", ha.port)
    writer.write(encode_report(0))  # connects, then never acknowledges anything
    await until(lambda: bool(ha.connections) and ha.connections[0].slave_request_offset == 0)
    resp = await client.invoke(master.addr, send_request("T", b"slow"))
    assert resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
    assert (resp.ext_fields or {})["queueOffset"] == "0"  # stored all the same
    async_send = send_request("T", b"nowait", extra={"WAIT": "false"})
    assert (await client.invoke(master.addr, async_send)).code == ResponseCode.SUCCESS
    writer.close()


async def test_metadata_sync_and_offsets_committed_on_the_slave_reach_the_master(
        tmp_path: Path, make_broker: MakeBroker, client: RemotingClient) -> None:
    master = await make_broker("m")
    slave = await make_broker("s", broker_id=1, broker_role=BrokerRole.SLAVE,
                              slave_read_enable=True)
    for i in range(3):
        await client.invoke(master.addr, send_request("Sync", f"{i}".encode()))
    group = {"consumerGroup": "G", "topic": "Sync", "queueId": "0"}
    await call(client, master.addr, RequestCode.UPDATE_CONSUMER_OFFSET,
               {**group, "commitOffset": "1"})
    await call(client, master.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
               body=b'{"groupName":"G","consumeEnable":true}')
    st = slave.state
    await until(lambda: st.offsets.query("G", "Sync", 0) == 1 and st.groups.get("G") is not None
                and st.topics.get("Sync") is not None)
    # The master goes away; the consumer reads from the slave and commits there.
    await master.stop()
    resp = await call(client, slave.addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                      {**group, "commitOffset": "3"})
    assert resp.code == ResponseCode.SUCCESS
    query = await call(client, slave.addr, RequestCode.QUERY_CONSUMER_OFFSET, group)
    assert query.ext_fields == {"offset": "3"}
    # The master returns (same store); the slave hands the progress over.
    back = await make_broker("m")
    await slave.registration.register_all()  # learns the new address now, not in 30 s
    await until(lambda: back.state.offsets.query("G", "Sync", 0) == 3)
    await until(lambda: not st.slave_commits)  # cleared once the master answered
    await until(lambda: st.offsets.query("G", "Sync", 0) == 3)
