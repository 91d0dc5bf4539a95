"""Replication between real broker processes."""

from __future__ import annotations

from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from tests.broker.helpers import send_request
from tests.ha.inproc import ha_status
from tests.ha.procs import BrokerProcess, wait_for_slave
from tests.ha.stores import assert_same_stores


async def test_master_and_slave_processes_replicate_and_their_stores_match(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess],
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    master = BrokerProcess(tmp_path, "master", ns, brokerRole="SYNC_MASTER")
    slave = BrokerProcess(tmp_path, "slave", ns, brokerRole="SLAVE", brokerId=1)
    brokers += [master, slave]
    await master.start()
    await slave.start()
    await wait_for_slave(client, master)
    body = bytes(range(256)) * 4
    for i in range(400):  # ~470 KiB: the 256 KiB segments roll
        resp = await client.invoke(master.addr, send_request(
            "Replicated", body + str(i).encode(), queue_id=i % 4, keys=f"k{i}"))
        assert resp.code == ResponseCode.SUCCESS, resp.remark  # the slave acknowledged it
    status = await ha_status(client, master.addr)
    assert status.ha_connection_info[0].diff == 0
    await slave.stop()
    await master.stop()
    m, s = master.open_store(), slave.open_store()
    try:
        assert len(m.commit_log.mfq.files) >= 2
        assert_same_stores(m, s)
        assert len(s.query_message("Replicated", "k7", 4, 0, 2**62).messages) == 1
    finally:
        m.close()
        s.close()
