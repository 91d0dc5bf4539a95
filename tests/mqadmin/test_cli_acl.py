"""mqadmin's access-control commands and per-context credentials against a secured broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.exit_codes import ExitCode
from tests.auth.conftest import ADMIN, AUTH_ON

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster, start_cluster

SECRET = "app-password-9"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = start_cluster(tmp_path, **AUTH_ON)
    try:
        yield running
    finally:
        running.stop()


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n")
    return str(path)


def test_users_and_rules_through_a_context_with_credentials(
        secured: BackgroundCluster, tmp_path: Path, mqadmin_home: Path) -> None:
    key_file = _file(tmp_path, "admin.secret", ADMIN.secret_key)
    added = invoke("context", "add", "sec", "-n", secured.ns, "--access-key", ADMIN.access_key,
                   "--secret-key-file", key_file, "-o", "json")
    assert added.exit_code == 0, added.stderr
    creds = mqadmin_home / "credentials.json"
    assert creds.stat().st_mode & 0o777 == 0o600
    assert ADMIN.secret_key not in added.stdout + added.stderr
    assert rows_of(added)[0]["accessKey"] == ADMIN.access_key

    pw = _file(tmp_path, "app.pw", SECRET)
    outputs = []
    for args in (
        ("createUser", "-u", "app-key", "--password-file", pw),
        ("createAcl", "-s", "app-key", "-r", "Topic:app-topic,Group:app-group", "-a", "Pub,Sub",
         "-d", "Allow"),
        ("updateAcl", "-s", "User:app-key", "-r", "Topic:audit*", "-a", "Sub", "-d", "Allow",
         "-i", "127.0.0.1"),
        ("updateUser", "-u", "app-key", "-s", "disable"),
    ):
        result = invoke(*args, "-c", "DefaultCluster", "--context", "sec", "--yes",
                        "-o", "json")
        assert result.exit_code == 0, (args, result.stderr)
        outputs.append(result.stdout + result.stderr)
    users = {r["username"]: r for r in json_rows("listUser", "-c", "DefaultCluster",
                                                 "--context", "sec")}
    assert users["app-key"]["userStatus"] == "disable"
    assert users["app-key"]["userType"] == "Normal"
    rules = json_rows("getAcl", "-s", "app-key", "-b", secured.broker_addr, "--context", "sec")
    assert {(r["resource"], r["actions"]) for r in rules} == {
        ("Topic:app-topic", "Pub,Sub"), ("Group:app-group", "Pub,Sub"), ("Topic:audit*", "Sub")}
    listed = json_rows("listAcl", "-r", "audit", "-c", "DefaultCluster", "--context", "sec")
    assert [r["sourceIps"] for r in listed] == ["127.0.0.1"]

    deleted = invoke("deleteAcl", "-s", "app-key", "-r", "Topic:audit*", "-b",
                     secured.broker_addr, "--context", "sec", "--yes", "-o", "json")
    assert deleted.exit_code == 0, deleted.stderr
    gone = invoke("deleteUser", "-u", "app-key", "-c", "DefaultCluster", "--context", "sec",
                  "--yes", "-o", "json")
    assert gone.exit_code == 0, gone.stderr
    audit = invoke("audit", "--limit", "50", "-o", "json")
    for text in [*outputs, audit.stdout, (mqadmin_home / "config.toml").read_text()]:
        assert SECRET not in text and ADMIN.secret_key not in text


def test_refused_without_credentials_and_with_a_readable_credentials_file(
        secured: BackgroundCluster, tmp_path: Path, mqadmin_home: Path) -> None:
    plain = invoke("listUser", "-b", secured.broker_addr, "-n", secured.ns)
    assert plain.exit_code == ExitCode.REJECTED, plain.stderr
    assert "not signed" in plain.stderr

    env = {"MQADMIN_ACCESS_KEY": ADMIN.access_key, "MQADMIN_SECRET_KEY": ADMIN.secret_key}
    ok = invoke("listUser", "-b", secured.broker_addr, "-n", secured.ns, "-o", "json", env=env)
    assert ok.exit_code == 0, ok.stderr

    key_file = _file(tmp_path, "admin.secret", ADMIN.secret_key)
    invoke("context", "add", "sec", "-n", secured.ns, "--access-key", ADMIN.access_key,
           "--secret-key-file", key_file)
    os.chmod(mqadmin_home / "credentials.json", 0o644)
    loose = invoke("listUser", "-b", secured.broker_addr, "--context", "sec")
    assert loose.exit_code == ExitCode.USAGE
    assert "chmod 600" in loose.stderr


def test_acl_1_0_commands_on_an_acl_enable_broker(tmp_path: Path, mqadmin_home: Path) -> None:
    from tests.auth.test_plain_acl import write_home
    home = tmp_path / "rmqhome"
    write_home(home)
    running = start_cluster(tmp_path, acl_enable=True, rocketmq_home=str(home))
    env = {"MQADMIN_ACCESS_KEY": "rocketmq2", "MQADMIN_SECRET_KEY": "12345678"}
    try:
        where = ("-c", "DefaultCluster", "-n", running.ns)
        secret = _file(tmp_path, "new.secret", "new-secret-77")
        texts = []
        for args in (("updateAclConfig", "-a", "newuser1", "--secret-key-file", secret,
                      "-t", "topicN=PUB,topicM=SUB", "-i", "DENY"),
                     ("updateGlobalWhiteAddr", "-g", "10.1.1.*,10.2.2.2"),
                     ("deleteAclConfig", "-a", "producer01")):
            result = invoke(*args, *where, "--yes", "-o", "json", env=env)
            assert result.exit_code == 0, (args, result.stderr)
            texts.append(result.stdout + result.stderr)
        versions = invoke("clusterAclConfigVersion", *where, "-o", "json", env=env)
        rows = rows_of(versions)
        assert {r["aclFile"].rsplit("/", 1)[-1]: r["counter"] for r in rows} == {
            "plain_acl.yml": 2, "extra.yml": 1}
        audit = invoke("audit", "-o", "json")
        assert all("new-secret-77" not in t for t in [*texts, audit.stdout])
    finally:
        running.stop()
