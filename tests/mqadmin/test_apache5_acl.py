"""ACL 2.0 users and rules through the console on Apache 5.3.3 with authentication and
authorization on (opt-in, APACHE_RMQ5_HOME): 5.3.3's commands, answers and refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apache5 import CLUSTER, Apache5, needs_apache5, running_apache5
from tests.mqadmin.cli import invoke, json_rows

pytestmark = [needs_apache5, pytest.mark.timeout(300)]

ADMIN = ("rocketmq", "12345678")
AUTH = [
    "authenticationEnabled=true",
    "authenticationProvider=org.apache.rocketmq.auth.authentication.provider."
    "DefaultAuthenticationProvider",
    "authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider."
    "LocalAuthenticationMetadataProvider",
    "authorizationEnabled=true",
    "authorizationProvider=org.apache.rocketmq.auth.authorization.provider."
    "DefaultAuthorizationProvider",
    "authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider."
    "LocalAuthorizationMetadataProvider",
    f'initAuthenticationUser={{"username":"{ADMIN[0]}","password":"{ADMIN[1]}"}}',
    f'innerClientAuthenticationCredentials={{"accessKey":"{ADMIN[0]}","secretKey":"{ADMIN[1]}"}}',
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apache5]:
    with running_apache5(tmp_path_factory.mktemp("apache5-acl"), AUTH, proxy=False) as cluster:
        yield cluster


@pytest.fixture
def as_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", ADMIN[0])
    monkeypatch.setenv("MQADMIN_SECRET_KEY", ADMIN[1])


def _apply(*args: str) -> None:
    result = invoke(*args, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr


def test_users_and_rules_round_trip(secured: Apache5, as_admin: None) -> None:
    where = ("-n", secured.ns, "-c", CLUSTER)
    _apply("createUser", *where, "-u", "alice", "-p", "alice-pw-1", "-t", "Normal")
    users = {r["username"]: r for r in json_rows("listUser", *where)}
    assert (users["alice"]["userType"], users["alice"]["userStatus"]) == ("Normal", "enable")
    assert users[ADMIN[0]]["userType"] == "Super"
    _apply("createAcl", *where, "-s", "User:alice", "-r", "Topic:orders,Group:g1",
           "-a", "Pub,Sub", "-d", "Allow", "-i", "127.0.0.1")
    rules = {r["resource"]: r for r in json_rows("getAcl", *where, "-s", "User:alice")}
    assert set(rules) == {"Topic:orders", "Group:g1"}
    assert (rules["Topic:orders"]["actions"], rules["Topic:orders"]["decision"]) == (
        "Pub,Sub", "Allow")
    _apply("updateAcl", *where, "-s", "User:alice", "-r", "Topic:orders", "-a", "Pub",
           "-d", "Deny")
    listed = [r for r in json_rows("listAcl", *where) if r["subject"] == "User:alice"]
    assert {(r["resource"], r["decision"]) for r in listed} == {("Topic:orders", "Deny"),
                                                                ("Group:g1", "Allow")}
    _apply("deleteAcl", *where, "-s", "User:alice", "-r", "Topic:orders")
    assert [r["resource"] for r in json_rows("getAcl", *where, "-s", "User:alice")] == [
        "Group:g1"]
    _apply("updateUser", *where, "-u", "alice", "-t", "Super")
    (alice,) = json_rows("getUser", *where, "-u", "alice")
    assert alice["userType"] == "Super"
    _apply("deleteUser", *where, "-u", "alice")
    assert "alice" not in {r["username"] for r in json_rows("listUser", *where)}


@pytest.mark.parametrize(("key", "secret", "remark"), [
    (None, None, "username cannot be null"),
    (ADMIN[0], "not-the-password", "check signature failed"),
    ("nobody", "whatever", "User:nobody is not found"),
])
def test_refusals_say_what_to_do(secured: Apache5, monkeypatch: pytest.MonkeyPatch,
                                 key: str | None, secret: str | None, remark: str) -> None:
    for name, value in (("MQADMIN_ACCESS_KEY", key), ("MQADMIN_SECRET_KEY", secret)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    result = invoke("listUser", "-n", secured.ns, "-c", CLUSTER)
    assert result.exit_code == 4
    assert remark in result.stderr and "Access control refused it" in result.stderr
