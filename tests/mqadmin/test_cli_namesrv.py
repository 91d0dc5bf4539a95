"""mqadmin's name-server commands, the name-server resolution, output formats, the mutation
flow and the exit-code table, through CliRunner against a live cluster."""

from __future__ import annotations

import csv
import io

import pytest
import typer

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import (
    BadResponseError,
    InvalidAddressError,
    NoPermissionError,
    QueryNotFoundError,
    ServerError,
    TopicNotExistError,
    UnreachableError,
)
from engine.protocol.perm import PERM_WRITE
from engine.remoting.errors import RemotingConnectError
from mqadmin import commands
from mqadmin.app import main
from mqadmin.exit_codes import (
    ExitCode,
    ServersFailed,
    UsageProblem,
    exit_code_for,
    message_for,
)
from mqadmin.render import OutputFormat, render
from tests.conftest import closed_port_addr

from .cli import invoke, parse_plain_table, rows_of, rows_of_any, text_rows
from .conftest import BackgroundCluster


def kv_value(cluster: BackgroundCluster, namespace: str, key: str) -> str | None:
    async def get(admin: MQAdmin) -> str | None:
        try:
            return await admin.namesrv.get_kv_config(namespace, key)
        except QueryNotFoundError:
            return None
    return cluster.admin_call(get)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- reads


def test_cluster_list(cluster: BackgroundCluster) -> None:
    [row] = rows_of(invoke("clusterList", "-n", cluster.ns, "-o", "json"))
    assert {k: row[k] for k in ("cluster", "brokerName", "brokerId", "addr")} == {
        "cluster": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
        "addr": cluster.broker_addr}
    assert row["version"].startswith("V") and row["inTPS"] == 0.0


def test_namesrv_addr_from_the_environment(cluster: BackgroundCluster) -> None:
    result = invoke("clusterList", "-o", "json", env={"NAMESRV_ADDR": cluster.ns})
    assert rows_of(result)[0]["brokerName"] == "broker-a"


def test_missing_namesrv_addr_names_every_way() -> None:
    result = invoke("clusterList")
    assert result.exit_code == ExitCode.USAGE
    assert "-n" in result.stderr and "NAMESRV_ADDR" in result.stderr
    assert "context" in result.stderr
    assert result.stdout == ""


def test_malformed_namesrv_addr_is_a_usage_error() -> None:
    result = invoke("clusterList", "-n", "localhost")
    assert result.exit_code == ExitCode.USAGE
    assert "host:port" in result.stderr


def test_unknown_topic_exits_not_found(cluster: BackgroundCluster) -> None:
    result = invoke("topicRoute", "-t", "NoSuchTopic", "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "NoSuchTopic" in result.stderr and "topicList" in result.stderr
    assert "Traceback" not in result.output


def test_unreachable_name_server_exits_5_without_traceback() -> None:
    dead = closed_port_addr()
    result = invoke("clusterList", "-n", dead)
    assert result.exit_code == ExitCode.UNREACHABLE
    assert dead in result.stderr and "running" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_debug_shows_the_traceback() -> None:
    result = invoke("clusterList", "-n", closed_port_addr(), "--debug")
    assert result.exit_code == ExitCode.UNREACHABLE
    assert "Traceback" in result.stderr


def test_fails_over_to_the_next_name_server(cluster: BackgroundCluster) -> None:
    dead = closed_port_addr()
    result = invoke("clusterList", "-n", f"{dead};{cluster.ns}", "-o", "json")
    assert result.exit_code == 0
    assert rows_of(result)[0]["addr"] == cluster.broker_addr
    assert dead in result.stderr and "trying the next one" in result.stderr


def test_get_namesrv_config(cluster: BackgroundCluster) -> None:
    rows = rows_of(invoke("getNamesrvConfig", "-n", cluster.ns, "-o", "json"))
    settings = {r["key"]: r["value"] for r in rows}
    assert settings["orderMessageEnable"] == "false"
    assert {r["nameServer"] for r in rows} == {cluster.ns}


def test_get_namesrv_config_partial_success(cluster: BackgroundCluster) -> None:
    dead = closed_port_addr()
    result = invoke("getNamesrvConfig", "-n", f"{cluster.ns};{dead}", "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL
    assert {r["nameServer"] for r in rows_of(result)} == {cluster.ns}
    assert dead in result.stderr and "1 of 2" in result.stderr


# ---------------------------------------------------------------------------- output formats


@pytest.mark.parametrize("command", [
    ["clusterList"], ["clusterList", "-m"], ["topicList"], ["topicList", "-c"],
    ["topicRoute", "-t", "TBW102"], ["getNamesrvConfig"], ["getBrokerConfig", "-c",
                                                           "DefaultCluster"],
    ["consumerProgress"], ["topicStatus", "-t", "TBW102"],
])
def test_csv_and_piped_table_hold_the_json_rows(cluster: BackgroundCluster,
                                                command: list[str]) -> None:
    as_json = text_rows(rows_of(invoke(*command, "-n", cluster.ns, "-o", "json")))
    as_csv = invoke(*command, "-n", cluster.ns, "-o", "csv")
    assert as_csv.exit_code == 0
    assert list(csv.DictReader(io.StringIO(as_csv.stdout))) == as_json
    as_table = invoke(*command, "-n", cluster.ns)
    assert as_table.exit_code == 0
    assert "\x1b[" not in as_table.stdout  # piped: no escape codes
    assert parse_plain_table(as_table.stdout) == as_json


def test_empty_results_still_have_a_header(cluster: BackgroundCluster) -> None:
    async def forget_everything(admin: MQAdmin) -> None:
        for topic in (await admin.namesrv.all_topics()).topic_list:
            await admin.namesrv.delete_topic(topic)
    cluster.admin_call(forget_everything)
    assert invoke("topicList", "-n", cluster.ns, "-o", "csv").stdout == "topic\n"
    assert invoke("topicList", "-n", cluster.ns).stdout == "topic\n"
    assert invoke("topicList", "-n", cluster.ns, "-o", "json").stdout.strip() == "[]"


# ---------------------------------------------------------------------------- mutations


def test_mutation_without_yes_and_terminal_is_refused(cluster: BackgroundCluster) -> None:
    result = invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v", "-n", cluster.ns)
    assert result.exit_code == ExitCode.USAGE
    assert "--yes" in result.stderr
    assert "plan" in result.stderr  # the plan was shown first
    assert result.stdout == ""
    assert kv_value(cluster, "NS", "k") is None


def test_update_and_delete_kv_config(cluster: BackgroundCluster) -> None:
    result = invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v1", "-n", cluster.ns,
                    "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert rows_of(result) == [{"nameServer": cluster.ns, "target": "NS/k",
                                "before": "(absent)", "after": "v1", "result": "OK",
                                "verified": True}]
    assert kv_value(cluster, "NS", "k") == "v1"
    assert "(absent)" in result.stderr and "v1" in result.stderr  # the plan, on stderr

    result = invoke("deleteKvConfig", "-s", "NS", "-k", "k", "-n", cluster.ns, "--yes",
                    "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["before"], row["after"], row["verified"]) == ("v1", "(absent)", True)
    assert kv_value(cluster, "NS", "k") is None


def test_confirmation_on_a_terminal(cluster: BackgroundCluster,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "stdin_is_terminal", lambda: True)
    args = ["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v", "-n", cluster.ns]
    declined = invoke(*args, input="n\n")
    assert declined.exit_code == ExitCode.ERROR
    assert "nothing was changed" in declined.stderr
    assert kv_value(cluster, "NS", "k") is None
    accepted = invoke(*args, input="y\n")
    assert accepted.exit_code == 0, accepted.stderr
    assert kv_value(cluster, "NS", "k") == "v"


def test_update_namesrv_config(cluster: BackgroundCluster) -> None:
    result = invoke("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true",
                    "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["before"], row["after"], row["verified"]) == ("false", "true", True)


def test_server_rejected_mutation_exits_4(cluster: BackgroundCluster) -> None:
    result = invoke("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x.json",
                    "-n", cluster.ns, "--yes")
    assert result.exit_code == ExitCode.REJECTED
    assert "NO_PERMISSION" in result.stderr and "config file" in result.stderr
    assert "Traceback" not in result.output


def test_unverified_mutation_exits_1(cluster: BackgroundCluster) -> None:
    """This engine ignores unknown setting names: accepted, but re-reading shows nothing."""
    result = invoke("updateNamesrvConfig", "-k", "noSuchSetting", "-v", "1",
                    "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == ExitCode.ERROR
    assert rows_of_any(result)[0]["verified"] is False
    assert "reading it back" in result.stderr


def test_partial_mutation_exits_6(cluster: BackgroundCluster) -> None:
    dead = closed_port_addr()
    result = invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v",
                    "-n", f"{cluster.ns};{dead}", "--yes", "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL
    assert [r["nameServer"] for r in rows_of(result)] == [cluster.ns]
    assert dead in result.stderr and "re-run" in result.stderr
    assert kv_value(cluster, "NS", "k") == "v"


def test_mutation_with_every_server_down_exits_5() -> None:
    result = invoke("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v",
                    "-n", closed_port_addr(), "--yes")
    assert result.exit_code == ExitCode.UNREACHABLE


def test_wipe_and_add_write_perm(cluster: BackgroundCluster) -> None:
    cluster.create_topic("PermTopic")

    def perm() -> int:
        [row] = rows_of(invoke("topicRoute", "-t", "PermTopic", "-n", cluster.ns, "-o", "json"))
        return int(row["perm"])

    result = invoke("wipeWritePerm", "-b", "broker-a", "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["verified"] is True and row["after"].startswith("0/")
    assert row["result"].startswith("wiped write perm of")
    assert not perm() & PERM_WRITE

    result = invoke("addWritePerm", "-b", "broker-a", "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    topics = row["after"].split("/")[1].split()[0]
    assert row["verified"] is True and row["after"].startswith(f"{topics}/")
    assert perm() & PERM_WRITE


def test_write_perm_of_an_unknown_broker_exits_3(cluster: BackgroundCluster) -> None:
    result = invoke("wipeWritePerm", "-b", "no-such-broker", "-n", cluster.ns, "--yes")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "clusterList" in result.stderr


# ---------------------------------------------------------------------------- main()


def test_main_returns_exit_codes(cluster: BackgroundCluster,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clusterList", "-n", closed_port_addr()]) == ExitCode.UNREACHABLE
    assert main(["topicRoute", "-n", cluster.ns, "-t", "NoSuchTopic"]) == ExitCode.NOT_FOUND
    assert main(["clusterList", "-n", cluster.ns, "-o", "json"]) == ExitCode.OK
    assert main(["--help"]) == ExitCode.OK
    assert main(["noSuchCommand"]) == ExitCode.USAGE
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert cluster.broker_addr in out.out


def test_help_groups_commands_in_panels() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for panel in ("Topics", "Cluster and brokers", "Groups and consumers", "Messages",
                  "Name server", "Store", "mqadmin itself"):
        assert panel in result.stdout
    for name in ("clusterList", "topicList", "topicRoute", "getNamesrvConfig",
                 "updateNamesrvConfig", "updateKvConfig", "deleteKvConfig", "wipeWritePerm",
                 "addWritePerm"):
        assert name in result.stdout


# ---------------------------------------------------------------------------- the exit-code table


@pytest.mark.parametrize(("exc", "code"), [
    (UsageProblem("x"), ExitCode.USAGE),
    (InvalidAddressError("x"), ExitCode.USAGE),
    (TopicNotExistError(17, "no route"), ExitCode.NOT_FOUND),
    (QueryNotFoundError(22, "no item"), ExitCode.NOT_FOUND),
    (NoPermissionError(16, "protected"), ExitCode.REJECTED),
    (ServerError(1, "boom"), ExitCode.REJECTED),
    (UnreachableError([("10.0.0.1:9876", RemotingConnectError("refused"))]),
     ExitCode.UNREACHABLE),
    (BadResponseError("garbage"), ExitCode.ERROR),
    (KeyboardInterrupt(), ExitCode.INTERRUPTED),
    (RuntimeError("bug"), ExitCode.ERROR),
])
def test_exit_code_table(exc: BaseException, code: ExitCode) -> None:
    assert exit_code_for(exc) == code
    message = message_for(exc)
    assert message and "Traceback" not in message
    if not isinstance(exc, UsageProblem):
        assert len(message) > len(str(exc)) + 10  # says what to try next


def test_servers_failed_codes() -> None:
    refused = UnreachableError([("a:1", RemotingConnectError("refused"))])
    rejected = NoPermissionError(16, "protected", "b:1")
    assert ServersFailed("x", [("a:1", refused)], 2).code == ExitCode.PARTIAL
    assert ServersFailed("x", [("a:1", refused)], 1).code == ExitCode.UNREACHABLE
    assert ServersFailed("x", [("a:1", refused), ("b:1", rejected)], 2).code == (
        ExitCode.REJECTED)


def test_interrupt_exits_130() -> None:
    with pytest.raises(typer.Exit) as caught, commands.guarded(debug=False):
        raise KeyboardInterrupt
    assert caught.value.exit_code == ExitCode.INTERRUPTED


class TerminalBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_table_on_a_terminal_is_drawn_by_rich() -> None:
    out = TerminalBuffer()
    render([{"topic": "[bold]T[/bold]", "n": 1}], OutputFormat.TABLE, stream=out)
    text = out.getvalue()
    assert "─" in text and "[bold]T[/bold]" in text  # a rule; cells are not markup
