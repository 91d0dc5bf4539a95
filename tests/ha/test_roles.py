"""Role changes of brokers in one process: promote, demote, fence, restart, startup fence."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from engine.broker.controller import BrokerController
from engine.ha.role_file import load_role
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.route import ClusterInfo
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.header.ha import NotifyBrokerRoleChangedRequestHeader
from engine.protocol.wire import from_json, to_ext
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.conftest import broker_configs, call
from tests.broker.helpers import send_request
from tests.conftest import closed_port_addr, namesrv_config
from tests.ha.inproc import FAST_HA, MakeBroker, ha_status, until
from tests.ha.stores import assert_same_stores
from tests.ha.traffic import mqadmin, route_of, writable


def role_change(master: str, epoch: int, *, broker_role: str | None = None,
                broker_id: int | None = None, master_ha_address: str | None = None,
                epoch_start_offset: int | None = None) -> dict[str, str]:
    return to_ext(NotifyBrokerRoleChangedRequestHeader(
        master, epoch, master_ha_address=master_ha_address, broker_id=broker_id,
        broker_role=broker_role, epoch_start_offset=epoch_start_offset))


async def master_in_route(client: RemotingClient, namesrv: NamesrvController) -> str | None:
    resp = await call(client, f"127.0.0.1:{namesrv.port}", RequestCode.GET_BROKER_CLUSTER_INFO)
    info = from_json(ClusterInfo, fastjson.loads(resp.body or b"{}"))
    return info.broker_addr_table["broker-a"].master_addr()


async def test_promote_demote_fence_and_restart_in_the_role_last_had(
        make_broker: MakeBroker, namesrv: NamesrvController, client: RemotingClient) -> None:
    a = await make_broker("a")
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    for i in range(5):
        assert (await client.invoke(a.addr, send_request("T", b"%d" % i))).code == 0

    fenced = await call(client, a.addr, RequestCode.HA_FENCE_WRITES,
                        {"fenced": "true", "reason": "test"})
    assert fenced.code == ResponseCode.SUCCESS
    final = int((fenced.ext_fields or {})["maxPhyOffset"])
    refused = await client.invoke(a.addr, send_request("T", b"late"))
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "fenced" in (refused.remark or "")
    await until(lambda: b.state.store.get_max_phy_offset() == final)

    low = await call(client, b.addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED, role_change(b.addr, 0))
    assert low.code == ResponseCode.SYSTEM_ERROR and "not above" in (low.remark or "")
    promoted = await call(client, b.addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                          role_change(b.addr, 1, broker_role="SYNC_MASTER"))
    assert promoted.code == ResponseCode.SUCCESS, promoted.remark
    assert promoted.ext_fields is not None and promoted.ext_fields["epochStartOffset"] == str(final)
    assert await master_in_route(client, namesrv) == b.addr
    demoted = await call(client, a.addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED, role_change(
        b.addr, 1, broker_id=1, master_ha_address=b.state.ha_server_addr,
        epoch_start_offset=final))
    assert demoted.code == ResponseCode.SUCCESS, demoted.remark
    assert a.state.is_slave and a.state.store.writes_refused is None
    await until(lambda: bool(b.state.ha and b.state.ha.connections))
    assert (await client.invoke(b.addr, send_request("T", b"new"))).code == ResponseCode.SUCCESS
    assert_same_stores(b.state.store, a.state.store)
    assert (await ha_status(client, a.addr)).epoch == 1
    record = load_role(a.roles.path)
    assert record is not None and (record.broker_role, record.broker_id) == ("SLAVE", 1)

    # Restarted with the configs they were first given, they come back in their new roles.
    await a.stop()
    await b.stop()
    b2 = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE)
    a2 = await make_broker("a")
    assert not b2.state.is_slave and b2.state.config.broker_id == 0
    assert b2.state.store_config.broker_role is BrokerRole.SYNC_MASTER
    assert a2.state.is_slave and a2.roles.epoch == 1
    await until(lambda: bool(b2.state.ha and b2.state.ha.connections))
    assert (await client.invoke(b2.addr, send_request("T", b"again"))).code == 0


async def test_a_master_refuses_writes_until_a_name_server_confirms_it(
        tmp_path: Path, client: RemotingClient) -> None:
    ns_addr = closed_port_addr()
    config, store = broker_configs(tmp_path, ns_addr, **FAST_HA)
    broker = BrokerController(config, store)
    await broker.start()
    namesrv = NamesrvController(dataclasses.replace(namesrv_config(tmp_path / "ns"),
                                                    listen_port=int(ns_addr.split(":")[1])))
    try:
        resp = await client.invoke(broker.addr, send_request("T", b"x"))
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "awaiting confirmation" in (resp.remark or "")
        await namesrv.start()  # the name server appears: the retry gets the confirmation
        await until(lambda: broker.state.store.writes_refused is None, timeout=5)
        assert (await client.invoke(broker.addr, send_request("T", b"y"))).code == 0
    finally:
        await broker.stop()
        await namesrv.stop()


async def test_switchover_rolls_back_when_the_slave_cannot_catch_up(
        tmp_path: Path, make_broker: MakeBroker, namesrv: NamesrvController,
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    a = await make_broker("a")
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    code, out, err = await mqadmin(tmp_path, "switchover", "-n", ns, "-b", "broker-a",
                                   "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)[0]
    assert plan["master"] == a.addr and plan["promote"] == b.addr and plan["newEpoch"] == 1

    ha_client = b.state.ha_client
    assert ha_client is not None and ha_client._proto is not None
    assert ha_client._proto.transport is not None
    ha_client._proto.transport.pause_reading()  # connected, but not catching up any more
    for i in range(3):
        assert (await client.invoke(a.addr, send_request("T", b"%d" % i))).code == 0
    code, out, err = await mqadmin(tmp_path, "switchover", "-n", ns, "-b", "broker-a",
                                   "--timeout", "0.5", "--yes", "-o", "json")
    assert code == 1, err
    assert "rolled back" in err
    assert [r["step"] for r in json.loads(out)] == ["write-protect", "fence", "rollback",
                                                   "rollback"]
    assert a.state.store.writes_refused is None and not a.state.is_slave and b.state.is_slave
    assert (await client.invoke(a.addr, send_request("T", b"after"))).code == 0
    route = await route_of(client, ns, "T")
    assert route is not None and writable(route)
    ha_client._proto.transport.resume_reading()
    await until(lambda: b.state.store.get_max_phy_offset() == a.state.store.get_max_phy_offset())
