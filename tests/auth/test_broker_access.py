"""A broker with authentication and authorization on: signatures, users, rules, every code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.broker.router import build_router
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.signature import Credentials, sign
from engine.remoting.client import RemotingClient
from engine.store.errors import ConfigFileError
from tests.broker.conftest import running_broker
from tests.broker.helpers import send_request

from .conftest import ADMIN, APP, call, grant_app

#: Requests a producer or consumer makes: allowed by Pub/Sub rules on its topic and group.
CLIENT_CODES = {
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.PULL_MESSAGE, RequestCode.QUERY_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET,
    RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.GET_EARLIEST_MSG_STORETIME,
    RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT,
    RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.END_TRANSACTION,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.LOCK_BATCH_MQ,
    RequestCode.UNLOCK_BATCH_MQ, RequestCode.CHECK_CLIENT_CONFIG,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,  # Sub on its group and topic, as in 5.3
    RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.PEEK_MESSAGE,
    RequestCode.NOTIFICATION,  # 5.x POP: Sub (POLLING_INFO needs Get, as in 5.3)
    RequestCode.RECALL_MESSAGE,  # 5.3: Pub on the topic
}

#: Fields naming APP's own topic and group, so a refusal is about the action, not the name.
OWN = {"topic": "app-topic", "b": "app-topic", "consumerGroup": "app-group", "group": "app-group",
       "groupName": "app-group", "destGroup": "app-group", "srcGroup": "app-group",
       "producerGroup": "app-group", "a": "app-group", "queueId": "0", "offset": "0"}


async def test_signed_requests_pass_and_every_kind_of_refusal_says_why(
        secured: BrokerController, client: RemotingClient) -> None:
    addr = secured.addr
    await grant_app(client, addr)
    ok = await client.invoke(addr, sign(send_request("app-topic", b"hi"), APP))
    assert ok.code == ResponseCode.SUCCESS, ok.remark

    cases = {
        "not signed": send_request("app-topic", b"x"),
        "unknown AccessKey": sign(send_request("app-topic", b"x"), Credentials("nobody12", "x")),
        "signature check failed": sign(send_request("app-topic", b"x"),
                                       Credentials(APP.access_key, "wrong-secret")),
        "no rule allows Pub on Topic:other": sign(send_request("other", b"x"), APP),
    }
    for expected, cmd in cases.items():
        answer = await client.invoke(addr, cmd)
        assert answer.code == ResponseCode.NO_PERMISSION, expected
        assert expected in (answer.remark or ""), answer.remark
        assert APP.secret_key not in (answer.remark or "")


async def test_every_code_refused_unsigned_and_wrongly_signed(
        secured: BrokerController, client: RemotingClient) -> None:
    codes = sorted(build_router().codes)
    assert len(codes) > 60
    wrong = Credentials(ADMIN.access_key, "not-the-secret")
    refused = 0
    for code in codes:
        for cmd in (request(code, dict(OWN), b"{}"), sign(request(code, dict(OWN), b"{}"), wrong)):
            answer = await client.invoke(secured.addr, cmd)
            assert answer.code == ResponseCode.NO_PERMISSION, (code, answer.remark)
            refused += 1
    assert refused == 2 * len(codes)


async def test_every_admin_code_refused_for_a_normal_user_without_the_rule(
        secured: BrokerController, client: RemotingClient) -> None:
    await grant_app(client, secured.addr)
    admin_codes = sorted(build_router().codes - CLIENT_CODES)
    assert RequestCode.UPDATE_BROKER_CONFIG in admin_codes
    for code in admin_codes:
        answer = await client.invoke(secured.addr, sign(request(code, dict(OWN), b"{}"), APP))
        assert answer.code == ResponseCode.NO_PERMISSION, (code, answer.remark)
    # and the SUPER user passes the check (whatever the handler then says)
    for code in admin_codes:
        answer = await client.invoke(secured.addr, sign(request(code, dict(OWN), b"{}"), ADMIN))
        assert answer.code != ResponseCode.NO_PERMISSION or "SUPER" in (answer.remark or ""), (
            code, answer.remark)


async def test_users_and_rules_persist_and_admin_codes_manage_them(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    from .conftest import AUTH_ON
    async with running_broker(tmp_path, namesrv, **AUTH_ON) as b:
        await grant_app(client, b.addr)
        r = await call(client, b.addr, RequestCode.AUTH_LIST_USER, {}, None, ADMIN)
        names = {u["username"] for u in json.loads(r.body or b"[]")}
        assert {ADMIN.access_key, APP.access_key} <= names
        config_dir = Path(b.state.store_config.config_dir)
    assert (config_dir / "users.json").stat().st_mode & 0o777 == 0o600
    async with running_broker(tmp_path, namesrv, **AUTH_ON) as b:
        r = await call(client, b.addr, RequestCode.AUTH_GET_ACL,
                       {"subject": f"User:{APP.access_key}"}, None, ADMIN)
        acl = json.loads(r.body or b"{}")
        assert acl["policies"][0]["entries"][0]["resource"] == "Topic:app-topic"
        ok = await client.invoke(b.addr, sign(send_request("app-topic", b"again"), APP))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        # a NORMAL user may not create a SUPER user, even with the Cluster rule
        grant = {"subject": f"User:{APP.access_key}", "policies": [{"entries": [
            {"resource": "Cluster:*", "actions": ["Update"], "decision": "Allow"}]}]}
        await call(client, b.addr, RequestCode.AUTH_UPDATE_ACL,
                   {"subject": f"User:{APP.access_key}"}, json.dumps(grant).encode(), ADMIN)
        sup = json.dumps({"username": "sneaky-1", "password": "pw-123456",
                          "userType": "Super"}).encode()
        r = await call(client, b.addr, RequestCode.AUTH_CREATE_USER, {"username": "sneaky-1"},
                       sup, APP)
        assert r.code == ResponseCode.NO_PERMISSION and "SUPER" in (r.remark or "")


async def test_a_bad_users_file_keeps_the_last_good_rules(
        secured: BrokerController, client: RemotingClient) -> None:
    await grant_app(client, secured.addr)
    access = secured.access
    users = Path(access.store.users_path)
    users.write_text("{ not json")
    assert not access.store.reload()
    ok = await client.invoke(secured.addr, sign(send_request("app-topic", b"x"), APP))
    assert ok.code == ResponseCode.SUCCESS, ok.remark


async def test_authentication_on_without_any_user_refuses_to_start(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    with pytest.raises(ConfigFileError, match="no user"):
        async with running_broker(tmp_path, namesrv, authentication_enabled=True):
            pass


async def test_access_control_turned_on_at_run_time(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    from .conftest import AUTH_ON
    settings = {k: v for k, v in AUTH_ON.items() if not k.endswith("_enabled")}
    async with running_broker(tmp_path, namesrv, **settings) as b:
        assert (await client.invoke(b.addr, send_request("app-topic", b"x"))).code == 0
        body = b"authenticationEnabled=true\nauthorizationEnabled=true\n"
        r = await call(client, b.addr, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
        assert r.code == ResponseCode.SUCCESS, r.remark
        refused = await client.invoke(b.addr, send_request("app-topic", b"x"))
        assert refused.code == ResponseCode.NO_PERMISSION
        ok = await client.invoke(b.addr, sign(send_request("app-topic", b"x"), ADMIN))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
