"""Fixtures: a broker with authentication and authorization on, its SUPER and inner users."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import Credentials, sign
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker

ADMIN = Credentials("admin-key", "admin-secret-1")
INNER = Credentials("inner-key", "inner-secret-1")
APP = Credentials("app-key", "app-secret-1")

AUTH_ON = {
    "authentication_enabled": True,
    "authorization_enabled": True,
    "init_authentication_user": json.dumps({"username": ADMIN.access_key,
                                            "password": ADMIN.secret_key}),
    "inner_client_authentication_credentials": json.dumps({"accessKey": INNER.access_key,
                                                           "secretKey": INNER.secret_key}),
}


async def call(client: RemotingClient, addr: str, code: int, ext: dict[str, str] | None = None,
               body: bytes | None = None, creds: Credentials | None = None) -> RemotingCommand:
    cmd = request(code, ext, body)
    if creds is not None:
        cmd = sign(cmd, creds)
    return await client.invoke(addr, cmd, timeout=10)


async def grant_app(client: RemotingClient, addr: str) -> None:
    """A NORMAL user APP with Pub/Sub on topic `app-topic` and Sub on group `app-group`."""
    user = json.dumps({"username": APP.access_key, "password": APP.secret_key}).encode()
    r = await call(client, addr, RequestCode.AUTH_CREATE_USER, {"username": APP.access_key},
                   user, ADMIN)
    assert r.code == ResponseCode.SUCCESS, r.remark
    acl = {"subject": f"User:{APP.access_key}", "policies": [{"entries": [
        {"resource": "Topic:app-topic", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Group:app-group", "actions": ["Sub"], "decision": "Allow"}]}]}
    r = await call(client, addr, RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{APP.access_key}"},
                   json.dumps(acl).encode(), ADMIN)
    assert r.code == ResponseCode.SUCCESS, r.remark


@pytest.fixture
async def secured(tmp_path: Path, namesrv: NamesrvController
                  ) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, **AUTH_ON) as controller:
        yield controller


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()
