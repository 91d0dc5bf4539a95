"""The needs table and the decision cache derived from it.

Every code of `NEEDS` yields a cache key that covers exactly what its rule reads: changing a
field the rule reads changes the key, changing any other field changes neither the key nor
the needs.  The guard caches each decision under that key (or under the needs themselves
when they come from the body), and a change to the users or rules drops every cached answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.auth.guard import AccessGuard
from engine.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
)
from engine.auth.needs import NEEDS, Need, broker_needs, needs_key
from engine.auth.store import AuthStore
from engine.protocol.codes import RequestCode as C
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import Credentials, sign

APP = Credentials("app-user", "app-secret-1")

#: Every extFields key any rule reads, and a few none does.
FIELDS = sorted({key for rule in NEEDS.values() for key in rule.reads}
                | {"queueId", "offset", "producerGroup", "unrelated"})

BODIES = {
    C.HEART_BEAT: {"clientID": "c", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "g1", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": "t1", "subString": "*"}]}]},
    C.LOCK_BATCH_MQ: {"consumerGroup": "g1", "clientId": "c",
                      "mqSet": [{"topic": "t1", "brokerName": "b", "queueId": 0}]},
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {"groupName": "g1"},
    C.BATCH_ACK_MESSAGE: {"acks": [{"c": "g1", "t": "t1", "r": "0", "so": 0, "q": 0, "rq": 0,
                                    "pt": 1, "it": 1, "b": "AQ=="}]},
}
BODIES[C.UNLOCK_BATCH_MQ] = BODIES[C.LOCK_BATCH_MQ]


def sample(code: int, **changed: str) -> RemotingCommand:
    """A request of `code` naming a distinct topic or group in every field, then `changed`."""
    ext = {key: f"name-{key}" for key in FIELDS} | changed
    body = json.dumps(BODIES[code]).encode() if code in BODIES else None
    return request(code, ext, body)


def needs_of(cmd: RemotingCommand) -> list[Need]:
    return broker_needs(cmd, "DefaultCluster")


@pytest.mark.parametrize("code", sorted(NEEDS), ids=lambda c: C(c).name)
def test_every_rule_yields_a_cache_key_covering_exactly_what_it_reads(code: int) -> None:
    rule = NEEDS[code]
    base = sample(code)
    if rule.from_body is not None:
        assert rule.reads == ()
        assert needs_key(base) is None  # cached by the needs themselves (below)
        assert needs_of(base), "a body rule names what the body names"
        return
    key = needs_key(base)
    assert key is not None and key[0] == code
    for field in FIELDS:
        other = sample(code, **{field: "something-else"})
        if field in rule.reads:
            assert needs_key(other) != key, f"{C(code).name} reads {field}: the key must show it"
        else:
            assert needs_key(other) == key
            assert needs_of(other) == needs_of(base), f"{C(code).name} must not read {field}"


def test_an_unknown_code_needs_cluster_update_under_a_key_of_its_own() -> None:
    cmd = request(99_999, {"topic": "t"})
    assert needs_key(cmd) == (99_999,)
    assert needs_of(cmd) == [(Resource.parse("Cluster:DefaultCluster"), (Action.UPDATE,))]


def _guard(tables_from: AuthStore, computed: list[int]) -> AccessGuard:
    def counted(cmd: RemotingCommand) -> list[Need]:
        computed.append(cmd.code)
        return needs_of(cmd)
    guard = AccessGuard(counted, authentication=True, authorization=True, needs_key=needs_key)
    tables_from.on_change = guard.install
    tables_from.load()
    return guard


def _store(tmp_path: Path, *entries: PolicyEntry) -> AuthStore:
    store = AuthStore(str(tmp_path))
    store.create_user(User(APP.access_key, APP.secret_key))
    if entries:
        store.put_acl(Acl(f"User:{APP.access_key}", (Policy(PolicyType.CUSTOM, entries),)))
    return store


@pytest.mark.parametrize("code", sorted(NEEDS), ids=lambda c: C(c).name)
def test_the_guard_caches_every_rule_s_decision(tmp_path: Path, code: int) -> None:
    store = _store(tmp_path, PolicyEntry(Resource.parse("*"), (Action.ALL,)))
    computed: list[int] = []
    guard = _guard(store, computed)
    first = guard.refusal(sign(sample(code), APP), "10.0.0.1:5000")
    assert guard.cached_decisions == 1
    second = guard.refusal(sign(sample(code), APP), "10.0.0.1:5000")
    assert first is None and second is None
    assert guard.cached_decisions == 1
    # keyed rules answer the second request from the key alone; body rules re-read the body
    assert len(computed) == (2 if NEEDS[code].from_body is not None else 1)


def test_a_change_to_the_users_or_rules_drops_the_cached_decisions(tmp_path: Path) -> None:
    orders = Resource.parse("Topic:orders")
    store = _store(tmp_path, PolicyEntry(orders, (Action.PUB,)))
    guard = _guard(store, [])
    send = sign(request(C.SEND_MESSAGE_V2, {"a": "pg", "b": "orders"}, b"m"), APP)
    addr = "10.0.0.1:5000"

    assert guard.refusal(send, addr) is None
    assert guard.cached_decisions == 1

    store.put_acl(Acl(f"User:{APP.access_key}", (Policy(PolicyType.CUSTOM, (
        PolicyEntry(orders, (Action.PUB,), Decision.DENY),)),)))
    assert guard.cached_decisions == 0
    assert "Pub on Topic:orders is denied by the rule on Topic:orders" in (
        guard.refusal(send, addr) or "")

    store.delete_acl(APP.access_key, None, None)
    assert "no rule allows Pub on Topic:orders" in (guard.refusal(send, addr) or "")

    store.update_user(APP.access_key, None, UserType.SUPER, None)
    assert guard.refusal(send, addr) is None

    store.update_user(APP.access_key, None, UserType.NORMAL, UserStatus.DISABLE)
    assert "is disabled" in (guard.refusal(send, addr) or "")


def test_rules_changed_in_the_file_reach_the_guard_on_reload(tmp_path: Path) -> None:
    store = _store(tmp_path, PolicyEntry(Resource.parse("Topic:orders"), (Action.PUB,)))
    guard = _guard(store, [])
    send = sign(request(C.SEND_MESSAGE_V2, {"a": "pg", "b": "orders"}, b"m"), APP)
    assert guard.refusal(send, "10.0.0.1:5000") is None

    acls = json.loads(Path(store.acls_path).read_text())
    acls["acls"][0]["policies"][0]["entries"][0]["decision"] = "Deny"
    Path(store.acls_path).write_text(json.dumps(acls))
    assert store.reload(force=True)
    assert "is denied" in (guard.refusal(send, "10.0.0.1:5000") or "")
