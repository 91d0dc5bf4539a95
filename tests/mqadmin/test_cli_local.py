"""mqadmin's own state through CliRunner: named contexts, how the name servers are chosen,
and the audit log."""

from __future__ import annotations

import os
import signal
import time
import tomllib
from pathlib import Path

import pytest

from engine.remoting import loop
from mqadmin import commands, config
from mqadmin.exit_codes import ExitCode
from tests.conftest import closed_port_addr

from .cli import invoke, json_rows
from .conftest import BackgroundCluster


def test_contexts_add_use_list_remove(mqadmin_home: Path) -> None:
    added = invoke("context", "add", "prod", "-n", "10.0.0.1:9876;10.0.0.2:9876",
                   "--description", 'the "real" one')
    assert added.exit_code == 0, added.stderr
    assert invoke("context", "add", "dev", "-n", "127.0.0.1:9876").exit_code == 0
    rows = json_rows("context", "list")
    assert rows == [
        {"current": False, "name": "dev", "namesrv": "127.0.0.1:9876", "accessKey": "",
         "description": ""},
        {"current": True, "name": "prod", "namesrv": "10.0.0.1:9876;10.0.0.2:9876",
         "accessKey": "", "description": 'the "real" one'}]
    assert invoke("context", "use", "dev").exit_code == 0
    doc = tomllib.loads((mqadmin_home / "config.toml").read_text())
    assert doc["current-context"] == "dev"
    assert doc["contexts"]["prod"]["description"] == 'the "real" one'
    assert invoke("context", "remove", "dev").exit_code == 0
    assert [r["name"] for r in json_rows("context", "list")] == ["prod"]
    assert config.load().current is None
    assert invoke("context", "use", "nope").exit_code == ExitCode.NOT_FOUND
    assert invoke("context", "add", "bad", "-n", "localhost").exit_code == ExitCode.USAGE


def test_name_servers_come_from_n_context_env_then_current(
        cluster: BackgroundCluster) -> None:
    dead = closed_port_addr()
    assert invoke("context", "add", "live", "-n", cluster.ns).exit_code == 0  # current
    assert invoke("context", "add", "dead", "-n", dead).exit_code == 0
    assert invoke("clusterList").exit_code == 0  # the current context
    assert invoke("clusterList", "--context", "dead").exit_code == ExitCode.UNREACHABLE
    assert invoke("clusterList", "--context", "dead", "-n", cluster.ns).exit_code == 0
    env_dead = {"NAMESRV_ADDR": dead}
    assert invoke("clusterList", env=env_dead).exit_code == ExitCode.UNREACHABLE
    assert invoke("clusterList", "--context", "live", env=env_dead).exit_code == 0
    assert invoke("clusterList", env={"MQADMIN_CONTEXT": "live", **env_dead}).exit_code == 0
    unknown = invoke("clusterList", "--context", "nope")
    assert unknown.exit_code == ExitCode.NOT_FOUND and "context add" in unknown.stderr


def test_bad_config_file_is_a_usage_error(mqadmin_home: Path) -> None:
    mqadmin_home.mkdir(parents=True)
    (mqadmin_home / "config.toml").write_text("current-context = [")
    result = invoke("clusterList")
    assert result.exit_code == ExitCode.USAGE and "config.toml" in result.stderr


def test_audit_lists_changes_with_context_and_plan(cluster: BackgroundCluster) -> None:
    assert invoke("context", "add", "here", "-n", cluster.ns).exit_code == 0
    assert invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v", "--context", "here",
                  "--yes").exit_code == 0
    assert invoke("deleteKvConfig", "-s", "NS", "-k", "k", "-n", cluster.ns,
                  "--yes").exit_code == 0
    rows = json_rows("audit")
    assert [(r["command"], r["target"], r["context"], r["outcome"], r["exitCode"])
            for r in rows] == [("updateKvConfig", "NS/k", "here", "applied", 0),
                               ("deleteKvConfig", "NS/k", None, "applied", 0)]
    assert rows[0]["who"] and rows[0]["at"] < rows[1]["at"]
    [detail] = json_rows("audit", "--id", str(rows[0]["id"]))
    assert detail["namesrv"] == cluster.ns
    assert detail["args"] == {"namespace": "NS", "key": "k", "value": "v",
                              "namesrv": None, "context": "here"}
    assert detail["plan"] == [{"nameServer": cluster.ns, "target": "NS/k",
                               "before": "(absent)", "after": "v"}]
    assert detail["result"][0]["verified"] is True
    assert [r["command"] for r in json_rows("audit", "--command", "deleteKvConfig")] == [
        "deleteKvConfig"]
    assert len(json_rows("audit", "--limit", "1")) == 1
    assert invoke("audit", "--id", "99").exit_code == ExitCode.NOT_FOUND
    shown = invoke("audit", "--id", str(rows[0]["id"]))
    assert shown.exit_code == 0 and "NS/k" in shown.stdout


def test_declined_and_dry_run_changes_are_not_audited(cluster: BackgroundCluster,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "stdin_is_terminal", lambda: True)
    args = ["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v", "-n", cluster.ns]
    assert invoke(*args, input="n\n").exit_code == ExitCode.ERROR
    dry = invoke(*args, "--dry-run", "-o", "json")
    assert dry.exit_code == 0
    assert json_rows("audit") == []
    assert json_rows("updateKvConfig", *args[1:], "--dry-run") == [
        {"nameServer": cluster.ns, "target": "NS/k", "before": "(absent)", "after": "v"}]


def test_one_ctrl_c_interrupts_the_question_asked_inside_an_event_loop() -> None:
    """The change runner asks inside the CLI's event loop, whose own Ctrl-C handler only
    cancels its task; while the question waits, Ctrl-C raises at once, as at any prompt."""
    answered: list[bool] = []

    async def ask() -> None:
        with commands.interruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(2)  # stands for the blocking prompt: interrupted, never finished
            answered.append(True)

    with pytest.raises(KeyboardInterrupt):
        loop.run(ask())
    assert answered == []


def test_unwritable_audit_log_is_a_warning(cluster: BackgroundCluster,
                                           mqadmin_home: Path) -> None:
    mqadmin_home.mkdir(parents=True)
    (mqadmin_home / "mqadmin.db").mkdir()  # a directory where the database should be
    result = invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v", "-n", cluster.ns,
                    "--yes")
    assert result.exit_code == 0
    assert "audit log" in result.stderr
