"""haStatus of a master without slaves (after a failover) says so, and what it means."""

from __future__ import annotations

import json
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.helpers import send_request
from tests.ha.inproc import MakeBroker, until
from tests.ha.traffic import mqadmin


async def test_ha_status_after_failover_says_no_slave_is_connected(
        tmp_path: Path, make_broker: MakeBroker, namesrv: NamesrvController,
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    a = await make_broker("a")
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    await a.stop()
    code, _, err = await mqadmin(tmp_path, "failover", "-n", ns, "-b", "broker-a",
                                 "--role", "SYNC_MASTER", "--accept-loss", "--yes")
    assert code == 0, err

    code, out, err = await mqadmin(tmp_path, "haStatus", "-n", ns, "-b", "broker-a",
                                   "-o", "json")
    assert code == 0, err
    [row] = [r for r in json.loads(out) if r["addr"] == b.addr]
    assert row["role"] == "SYNC_MASTER" and row["peer"] is None
    assert "no slave connected" in row["note"] and "SLAVE_NOT_AVAILABLE" in row["note"]
    assert f"{b.addr}" in err and "no slave connected" in err
    sent = await client.invoke(b.addr, send_request("T", b"x"))
    assert sent.code == ResponseCode.SLAVE_NOT_AVAILABLE  # as the note says
