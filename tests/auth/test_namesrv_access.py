"""A name server with authentication on: changes need a SUPER user, reads stay open."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.auth.errors import AuthConfigError
from engine.namesrv.access import MUTATIONS
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.conftest import addr_of, namesrv_config

from .conftest import ADMIN, APP, AUTH_ON, INNER, call

NS_AUTH = {k: AUTH_ON[k] for k in ("init_authentication_user",
                                   "inner_client_authentication_credentials")}


async def test_changes_need_a_super_user_and_brokers_register_with_the_inner_key(
        tmp_path: Path, client: RemotingClient) -> None:
    ns = NamesrvController(namesrv_config(tmp_path / "ns", authentication_enabled=True,
                                          **NS_AUTH))
    await ns.start()
    try:
        addr = addr_of(ns)
        async with running_broker(tmp_path, ns, **AUTH_ON) as broker:
            info = await call(client, addr, RequestCode.GET_BROKER_CLUSTER_INFO)
            assert info.code == ResponseCode.SUCCESS
            assert broker.addr.encode() in (info.body or b"")  # registered, signed by INNER
        kv = {"namespace": "ns", "key": "k", "value": "v"}
        for creds, expected in ((None, ResponseCode.NO_PERMISSION),
                                (APP, ResponseCode.NO_PERMISSION),
                                (ADMIN, ResponseCode.SUCCESS), (INNER, ResponseCode.SUCCESS)):
            r = await call(client, addr, RequestCode.PUT_KV_CONFIG, kv, None, creds)
            assert r.code == expected, (creds, r.remark)
        for code in sorted(MUTATIONS):
            r = await call(client, addr, code, {"brokerName": "x", "namespace": "ns"})
            assert r.code == ResponseCode.NO_PERMISSION, code
        read = await call(client, addr, RequestCode.GET_KV_CONFIG,
                          {"namespace": "ns", "key": "k"})
        assert read.code == ResponseCode.SUCCESS
    finally:
        await ns.stop()


def test_authentication_on_without_users_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="no user"):
        NamesrvController(namesrv_config(tmp_path, authentication_enabled=True))
