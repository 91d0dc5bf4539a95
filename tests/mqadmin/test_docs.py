"""The meta test: every command has help text, Apache's command names are all there, every
command speaks ``-o`` (or ``--output``) and ``--debug``, and docs/cli-reference.md is the
generated reference, unedited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqadmin import docgen
from mqadmin.app import command as app_command

from .cli import invoke

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli-reference.md"

APACHE_COMMANDS = (
    "updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "topicClusterList",
    "updateTopicPerm", "updateOrderConf",
    "clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig", "wipeWritePerm",
    "addWritePerm", "brokerConsumeStats", "statsAll", "clusterRT",
    "updateSubGroup", "deleteSubGroup", "consumerProgress", "consumerConnection",
    "consumerStatus", "producerConnection", "resetOffsetByTime", "skipAccumulatedMessage",
    "cloneGroupOffset", "allocateMQ",
    "queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset", "printMsg",
    "printMsgByQueue", "sendMessage", "consumeMessage", "checkMsgSendRT", "queryCq",
    "updateKvConfig", "deleteKvConfig", "getNamesrvConfig", "updateNamesrvConfig",
    "cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic",
)


def all_commands() -> list[tuple[str, str, Any]]:
    return list(docgen.commands(app_command()))


def test_every_command_has_help_text() -> None:
    found = all_commands()
    assert len(found) > len(APACHE_COMMANDS)
    for _, path, command in found:
        assert (command.help or "").strip(), f"{path} has no help text"
        for param in command.params:
            if param.name not in docgen.HIDDEN:
                assert (getattr(param, "help", None) or "").strip(), f"{path} {param.name}"


def test_apache_command_names_are_commands() -> None:
    names = {path.split()[-1] for _, path, _ in all_commands()}
    assert set(APACHE_COMMANDS) <= names


#: Commands that draw a terminal UI and print no rows.
INTERACTIVE = {"mqadmin dashboard"}


def test_every_command_has_output_and_debug() -> None:
    for _, path, command in all_commands():
        if path in INTERACTIVE:
            continue
        opts = {o for p in command.params for o in p.opts}
        assert "--output" in opts and "--debug" in opts, path


def test_reference_is_generated_from_the_app() -> None:
    generated = docgen.render()
    assert REFERENCE.read_text() == generated, (
        "docs/cli-reference.md is stale: run python -m mqadmin.docgen > docs/cli-reference.md")
    for _, path, _ in all_commands():
        assert f"### `{path}`" in generated


@pytest.mark.parametrize("name", ["clusterList", "updateTopic", "dev", "context"])
def test_help_of_a_command(name: str) -> None:
    result = invoke(name, "--help")
    assert result.exit_code == 0 and "Usage" in result.stdout


def test_shell_completion_is_offered() -> None:
    result = invoke("--help")
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout
