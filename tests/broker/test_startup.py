"""A broker starts on port 0, registers with the name server, and stops cleanly."""

from __future__ import annotations

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.remoting.client import RemotingClient

from .conftest import call


async def test_broker_registers_and_routes_resolve(namesrv: NamesrvController,
                                                   broker: BrokerController,
                                                   client: RemotingClient) -> None:
    await broker.registration.register_all()
    ns = f"127.0.0.1:{namesrv.port}"
    info = fastjson.loads((await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: broker.addr}
    resp = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert resp.code == ResponseCode.SUCCESS
    route = fastjson.loads(resp.body)
    assert route["queueDatas"][0]["perm"] == 7
