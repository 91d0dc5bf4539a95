"""The Apache C++ client with session credentials against our broker with access control on.

A right user produces and consumes; a wrong secret, an unknown key, a topic the user may not
Pub to and no credentials at all are refused (NO_PERMISSION, so every send fails).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.remoting.client import RemotingClient
from tests.auth.conftest import ADMIN, AUTH_ON, call
from tests.broker.conftest import broker_configs
from tests.compat.test_cpp_broker import run_driver
from tests.compat.test_cpp_namesrv import pytestmark as cpp_available
from tests.conftest import namesrv_config

pytestmark = cpp_available
TOPIC, FORBIDDEN, GROUP = "AclCppTopic", "AclCppForbidden", "AclCppCG"
USER, SECRET = "cpp-user-1", "cpp-secret-1"
COUNT = 4


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[str]:
    ns = NamesrvController(namesrv_config(tmp_path))
    await ns.start()
    config, store = broker_configs(tmp_path, f"127.0.0.1:{ns.port}", **AUTH_ON)
    broker = BrokerController(config, store)
    await broker.start()
    for topic in (TOPIC, FORBIDDEN):
        broker.state.topics.put(TopicConfig(topic, 2, 2))
    await broker.registration.register_all()
    client = RemotingClient()
    try:
        await _grant(client, broker)
        yield f"127.0.0.1:{ns.port}"
    finally:
        await client.close()
        await broker.stop()
        await ns.stop()


async def _grant(client: RemotingClient, broker: BrokerController) -> None:
    user = json.dumps({"username": USER, "password": SECRET}).encode()
    r = await call(client, broker.addr, RequestCode.AUTH_CREATE_USER, {"username": USER}, user,
                   ADMIN)
    assert r.code == ResponseCode.SUCCESS, r.remark
    acl = {"subject": f"User:{USER}", "policies": [{"entries": [
        {"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": f"Group:{GROUP}", "actions": ["Sub"], "decision": "Allow"}]}]}
    r = await call(client, broker.addr, RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{USER}"},
                   json.dumps(acl).encode(), ADMIN)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def _produce(tmp_path: Path, namesrv: str, topic: str, ak: str | None, sk: str | None
                   ) -> list[dict[str, object]]:
    import os
    saved = {k: os.environ.get(k) for k in ("CPP_ACCESS_KEY", "CPP_SECRET_KEY")}
    try:
        for key, value in (("CPP_ACCESS_KEY", ak), ("CPP_SECRET_KEY", sk)):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return await run_driver(tmp_path, "produce-try", namesrv, topic, str(COUNT))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def test_cpp_client_with_the_right_user_produces_and_consumes(
        cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = await _produce(tmp_path, cluster, TOPIC, USER, SECRET)
    assert [r["sent"] for r in lines if "sent" in r] == list(range(COUNT)), lines
    monkeypatch.setenv("CPP_ACCESS_KEY", USER)
    monkeypatch.setenv("CPP_SECRET_KEY", SECRET)
    got = await run_driver(tmp_path, "push", cluster, TOPIC, GROUP, str(COUNT))
    bodies = sorted(r["received"]["body"] for r in got  # type: ignore[index]
                    if isinstance(r.get("received"), dict))
    assert bodies == [f"cpp-try-{i}" for i in range(COUNT)]


@pytest.mark.parametrize(("remark", "topic", "ak", "sk"), [
    (f"signature check failed for AccessKey '{USER}'", TOPIC, USER, "not-the-secret"),
    ("unknown AccessKey 'nobody-at-all'", TOPIC, "nobody-at-all", SECRET),
    (f"no rule allows Pub on Topic:{FORBIDDEN}", FORBIDDEN, USER, SECRET),
    ("is not signed", TOPIC, None, None),  # the C++ client sends AccessKey "" then
])
async def test_cpp_client_is_refused(cluster: str, tmp_path: Path, remark: str, topic: str,
                                     ak: str | None, sk: str | None) -> None:
    lines = await _produce(tmp_path, cluster, topic, ak, sk)
    refused = [r for r in lines if "refused" in r]
    assert len(refused) == COUNT and not any("sent" in r for r in lines), (remark, lines)
    # after its retries the C++ client reports "No route info"; its log has our answer
    log = "".join(p.read_text(errors="replace")
                  for p in (tmp_path / "home" / "logs").rglob("*.log*"))
    assert f"{remark}" in log and "error code:16" in log, log[-2000:]
