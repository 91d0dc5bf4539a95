"""One change runner behind both front-ends: a dashboard change carrying a password is audited
with the password masked, and the CLI and the dashboard audit the same change alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from mqadmin import history
from mqadmin.config import resolve
from mqadmin.operations.acl import v2 as acl
from mqadmin.operations.change import MutationChange
from mqadmin.tui.app import Dashboard
from mqadmin.tui.screens.access import AccessScreen
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.topics import TopicsScreen
from tests.auth.conftest import ADMIN, AUTH_ON
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, start_cluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, keys_of, loaded, table, until
from tests.mqadmin.tui.test_changes import finish

SECRET = "app-password-9"
#: The arguments only one front-end records: the CLI's connection options, the dashboard's
#: mark.
CLI_ONLY = ("namesrv", "context")
DASHBOARD_ONLY = ("via",)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = start_cluster(tmp_path, **AUTH_ON)
    try:
        yield running
    finally:
        running.stop()


async def cli(*args: str) -> Result:
    """The CLI, on a thread of its own (it runs its own event loop); it must succeed."""
    result = await asyncio.to_thread(invoke, *args)
    assert result.exit_code == 0, (args, result.stderr)
    return result


def alike(record: dict[str, Any], dropped: tuple[str, ...]) -> dict[str, Any]:
    """`record` without what differs between two runs (id, time), the front-end that made
    it (`via`, read from the arguments) and the arguments only one front-end records."""
    args = {k: v for k, v in record["args"].items() if k not in dropped}
    return {k: v for k, v in record.items() if k not in ("id", "at", "via")} | {"args": args}


async def test_a_password_in_a_dashboard_change_is_masked_as_the_cli_masks_it(
        secured: BackgroundCluster, tmp_path: Path) -> None:
    key_file = tmp_path / "admin.secret"
    key_file.write_text(ADMIN.secret_key + "\n")
    await cli("context", "add", "sec", "-n", secured.ns, "--access-key", ADMIN.access_key,
              "--secret-key-file", str(key_file))
    broker = secured.broker_addr
    app = Dashboard(resolve(None, "sec"), start="access")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, AccessScreen)
        change = MutationChange(
            lambda admin: acl.create_user(admin, "app-key", SECRET, broker_addr=broker,
                                          cluster=None),
            {"username": "app-key", "password": SECRET, "password_file": None,
             "user_type": None, "broker_addr": broker, "cluster": None})
        app.push_screen(ChangeScreen(change, "createUser app-key"))
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
    [dashboard_record] = history.records(detail=True)
    assert dashboard_record["args"]["password"] == history.MASK
    assert dashboard_record["args"]["via"] == "dashboard"
    assert SECRET.encode() not in history.db_path().read_bytes()
    users = await cli("getUser", "-u", "app-key", "-b", broker, "--context", "sec")
    assert "app-key" in users.stdout

    where = ("-b", broker, "--context", "sec", "--yes")
    await cli("deleteUser", "-u", "app-key", *where)
    await cli("createUser", "-u", "app-key", "-p", SECRET, *where)
    cli_record = history.records(detail=True)[-1]
    assert cli_record["args"]["password"] == history.MASK
    assert alike(cli_record, CLI_ONLY) == alike(dashboard_record, DASHBOARD_ONLY)
    assert SECRET.encode() not in history.db_path().read_bytes()


async def test_the_cli_and_the_dashboard_audit_a_topic_deletion_alike(
        cluster: BackgroundCluster) -> None:
    await cli("context", "add", "test", "-n", cluster.ns)  # the dashboard's context
    create = ("updateTopic", "-t", "Doomed", "-c", "DefaultCluster", "-r", "2", "-w", "2",
              "--context", "test", "--yes")
    await cli(*create)
    app = dashboard(cluster.ns, start="topics")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, TopicsScreen)
        await until(pilot, lambda: "Doomed" in keys_of(pilot), what="the topic")
        table(pilot).move_cursor(row=keys_of(pilot).index("Doomed"))
        await pilot.press("d")
        dialog = await finish(pilot)
        assert dialog.state == "done", dialog.outcome
    await cli(*create)
    await cli("deleteTopic", "-t", "Doomed", "-c", "DefaultCluster", "--context", "test",
              "--yes")
    records = history.records(detail=True)
    assert [r["command"] for r in records] == ["updateTopic", "deleteTopic", "updateTopic",
                                               "deleteTopic"]
    by_dashboard, by_cli = records[1], records[3]
    assert by_dashboard["args"]["via"] == "dashboard" and "via" not in by_cli["args"]
    assert (by_dashboard["via"], by_cli["via"]) == ("dashboard", "cli")
    assert alike(by_cli, CLI_ONLY) == alike(by_dashboard, DASHBOARD_ONLY)
