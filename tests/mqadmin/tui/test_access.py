"""The Access screen on a broker with authentication on: the context's credentials sign
the dashboard's requests; users and rules are shown; without credentials it says why."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.config import resolve
from mqadmin.tui.app import Dashboard
from mqadmin.tui.screens.access import AccessScreen
from tests.auth.conftest import ADMIN, AUTH_ON
from tests.mqadmin.cli import invoke
from tests.mqadmin.conftest import BackgroundCluster, start_cluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, loaded, table, until


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = start_cluster(tmp_path, **AUTH_ON)
    try:
        yield running
    finally:
        running.stop()


async def test_users_and_rules_with_the_contexts_credentials(
        secured: BackgroundCluster, tmp_path: Path) -> None:
    key_file = tmp_path / "admin.secret"
    key_file.write_text(ADMIN.secret_key + "\n")
    assert invoke("context", "add", "sec", "-n", secured.ns, "--access-key", ADMIN.access_key,
                  "--secret-key-file", str(key_file)).exit_code == 0
    created = await asyncio.to_thread(  # the CLI runs its own event loop
        invoke, "createAcl", "-s", ADMIN.access_key, "-r", "Topic:orders", "-a", "Pub",
        "-d", "Allow", "-c", "DefaultCluster", "--context", "sec", "--yes")
    assert created.exit_code == 0, created.stderr
    app = Dashboard(resolve(None, "sec"), start="access")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, AccessScreen)
        users = table(pilot, "#users").shown_rows()
        assert ADMIN.access_key in {r["username"] for r in users}
        rules = table(pilot, "#rules").shown_rows()
        assert any(r["resource"] == "Topic:orders" and r["decision"] == "Allow" for r in rules)

    unsigned = dashboard(secured.ns, start="access")  # no credentials: refused, not a crash
    async with unsigned.run_test(size=SIZE) as pilot:
        screen = unsigned.screen
        await until(pilot, lambda: screen.query_one("#banner").has_class("shown")
                    or "Not readable" in str(screen.query_one("#summary").render()),
                    what="the refusal")
