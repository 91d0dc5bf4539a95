"""4.9's plain_acl.yml: after conversion the broker decides as 4.9.7's own rules do.

`decide_49` restates 4.9.7's `PlainAccessValidator.parse` + `PlainPermissionManager.validate`
(global white addresses, the account's white address, signature, admin codes, per-resource
perms without fallback, default perms) for the requests 4.9 checks; the engine's guard, fed
the converted users and rules, must give the same answer for every account, secret, source
address and request of the matrix.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import yaml

from engine.auth.guard import AccessGuard
from engine.auth.needs import broker_needs
from engine.auth.store import AuthStore
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode as C
from engine.protocol.codes import ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import Credentials, sign
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker

# The shape of Apache's distribution/conf/plain_acl.yml and docs (user_guide.md), plus a
# second file under conf/acl/ with the cases 4.9 and a naive conversion disagree on.
MAIN = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""
EXTRA = """
accounts:
  - accessKey: producer01
    secretKey: producer-secret
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms:
      - topicP=PUB
  - accessKey: opsadmin1
    secretKey: ops-secret-1
    admin: true
    defaultTopicPerm: DENY
    topicPerms:
      - topicB=SUB
"""
SECRETS = {"RocketMQ": "12345678", "rocketmq2": "12345678", "producer01": "producer-secret",
           "opsadmin1": "ops-secret-1"}
ADMIN_CODES = (C.UPDATE_AND_CREATE_TOPIC, C.UPDATE_BROKER_CONFIG, C.DELETE_TOPIC_IN_BROKER,
               C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, C.DELETE_SUBSCRIPTIONGROUP)
TOPICS = ("topicA", "topicB", "topicC", "topicP", "topicZ")
GROUPS = ("groupA", "groupB", "groupC", "groupZ")


def write_home(home: Path) -> None:
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(MAIN)
    (home / "conf" / "acl" / "extra.yml").write_text(EXTRA)


# ------------------------------------------------------------------------ 4.9.7, restated

PUB, SUB, DENY = 4, 8, 1
PERM = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def _matches(pattern: str | None, ip: str) -> bool:
    if not pattern:
        return False
    head = pattern.rstrip("*")
    return ip.startswith(head) if pattern.endswith("*") else ip == pattern


def decide_49(docs: list[dict[str, Any]], ak: str | None, secret_ok: bool, ip: str,
              code: int, needs: dict[str, int]) -> bool:
    for doc in docs:
        if any(_matches(w, ip) for w in doc.get("globalWhiteRemoteAddresses") or []):
            return True
    accounts = {a["accessKey"]: a for doc in docs for a in doc.get("accounts") or []}
    account = accounts.get(ak) if ak else None
    if account is None:
        return False
    if _matches(account.get("whiteRemoteAddress"), ip):
        return True
    if not secret_ok:
        return False
    if code in ADMIN_CODES and not account.get("admin"):
        return False
    owned = {}
    for text in account.get("topicPerms") or []:
        name, perm = text.split("=")
        owned[name.strip()] = PERM[perm.strip()]
    for text in account.get("groupPerms") or []:
        name, perm = text.split("=")
        owned["%RETRY%" + name.strip()] = PERM[perm.strip()]
    if not owned and account.get("admin"):
        return True
    for resource, needed in needs.items():
        is_group = resource.startswith("%RETRY%")
        held = owned.get(resource, PERM.get(str(account.get(
            "defaultGroupPerm" if is_group else "defaultTopicPerm")), DENY))
        if held & DENY or not needed & held:
            return False
    return True


# ------------------------------------------------------------------------ requests


def requests() -> list[tuple[RemotingCommand, dict[str, int]]]:
    """Each request with what 4.9.7's `parse` makes it need (resource -> PUB/SUB)."""
    out: list[tuple[RemotingCommand, dict[str, int]]] = []
    for topic in TOPICS:
        out.append((request(C.SEND_MESSAGE_V2, {"a": "pg", "b": topic}, b"m"), {topic: PUB}))
        out.append((request(C.SEND_MESSAGE, {"producerGroup": "pg", "topic": topic}, b"m"),
                    {topic: PUB}))
    for topic, group in itertools.product(TOPICS, GROUPS):
        retry = "%RETRY%" + group
        out.append((request(C.PULL_MESSAGE, {"topic": topic, "consumerGroup": group}),
                    {topic: SUB, retry: SUB}))
        out.append((request(C.UPDATE_CONSUMER_OFFSET, {"topic": topic, "consumerGroup": group,
                                                       "queueId": "0", "commitOffset": "1"}),
                    {retry: SUB, topic: SUB}))
        heartbeat = {"clientID": "c", "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "unitMode": False, "subscriptionDataSet": [{"topic": topic, "subString": "*"}]}]}
        out.append((request(C.HEART_BEAT, None, json.dumps(heartbeat).encode()),
                    {retry: SUB, topic: SUB}))
    for group in GROUPS:
        retry = "%RETRY%" + group
        out.append((request(C.CONSUMER_SEND_MSG_BACK, {"group": group, "offset": "0"}),
                    {retry: SUB}))
        out.append((request(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
                    {retry: SUB}))
        out.append((request(C.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": group}),
                    {retry: SUB}))
        out.append((request(C.SEND_MESSAGE_V2, {"a": group, "b": retry}, b"m"), {retry: SUB}))
    for code in ADMIN_CODES:
        out.append((request(code, {"topic": "topicB", "groupName": "groupB"},
                            b'{"groupName":"groupB"}'), {}))
    return out


def test_converted_rules_decide_as_the_4_9_file_does(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_home(home)
    docs = [yaml.safe_load(MAIN), yaml.safe_load(EXTRA)]
    store = AuthStore(str(tmp_path / "config"), rocketmq_home=str(home))
    guard = AccessGuard(lambda cmd: broker_needs(cmd, "DefaultCluster"),
                        authentication=True, authorization=True)
    store.on_change = guard.install
    store.load()
    checked = disagreements = 0
    wrong: list[str] = []
    for (cmd, needs), ak, secret_ok, ip in itertools.product(
            requests(), [*SECRETS, "stranger1", None], (True, False),
            ("127.0.0.1", "10.10.103.7", "192.168.1.9")):
        signed = cmd
        if ak is not None:
            secret = SECRETS.get(ak, "whatever") if secret_ok else "wrong-secret"
            signed = sign(cmd, Credentials(ak, secret))
        ours = guard.refusal(signed, f"{ip}:5555") is None
        theirs = decide_49(docs, ak, secret_ok and ak in SECRETS, ip, cmd.code, needs)
        checked += 1
        if ours != theirs:
            disagreements += 1
            wrong.append(f"{C(cmd.code).name} {cmd.ext_fields} ak={ak} ok={secret_ok} ip={ip}: "
                         f"ours={ours} 4.9={theirs} ({guard.refusal(signed, ip + ':1')})")
    assert checked > 2000
    assert disagreements == 0, "\n".join(wrong[:20])


async def test_acl_enable_broker_reads_plain_acl_and_its_1_0_admin_codes_edit_it(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    home = tmp_path / "home"
    write_home(home)
    client = RemotingClient()
    admin = Credentials("rocketmq2", "12345678")
    try:
        async with running_broker(tmp_path, namesrv, acl_enable=True,
                                  rocketmq_home=str(home)) as broker:
            async def call(code: int, ext: dict[str, str] | None = None,
                           creds: Credentials = admin) -> RemotingCommand:
                return await client.invoke(broker.addr, sign(request(code, ext), creds))

            r = await call(C.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newuser1", "secretKey": "newsecret1", "admin": "false",
                "defaultTopicPerm": "DENY", "topicPerms": "topicN=PUB"})
            assert r.code == ResponseCode.SUCCESS, r.remark
            new = Credentials("newuser1", "newsecret1")
            sent = await client.invoke(broker.addr, sign(request(
                C.SEND_MESSAGE_V2, {"a": "pg", "b": "topicN"}, b"x"), new))
            assert sent.code != ResponseCode.NO_PERMISSION, sent.remark
            saved = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
            assert saved["dataVersion"][0]["counter"] == 1
            assert any(a["accessKey"] == "newuser1" for a in saved["accounts"])

            bad = await call(C.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "short",
                                                              "secretKey": "x"})
            assert bad.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
            assert "longer than 6" in (bad.remark or "")

            info = await call(C.GET_BROKER_CLUSTER_ACL_INFO)
            versions = json.loads((info.ext_fields or {})["allAclFileVersion"])
            assert set(versions) == {str(home / "conf" / "plain_acl.yml"),
                                     str(home / "conf" / "acl" / "extra.yml")}
            r = await call(C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.1.1.*"})
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await call(C.DELETE_ACL_CONFIG, {"accessKey": "newuser1"})
            assert r.code == ResponseCode.SUCCESS, r.remark
            gone = await client.invoke(broker.addr, sign(request(
                C.SEND_MESSAGE_V2, {"a": "pg", "b": "topicN"}, b"x"), new))
            assert gone.code == ResponseCode.NO_PERMISSION
            normal = await call(C.DELETE_ACL_CONFIG, {"accessKey": "producer01"},
                                Credentials("RocketMQ", "12345678"))
            assert normal.code == ResponseCode.NO_PERMISSION
    finally:
        await client.close()
