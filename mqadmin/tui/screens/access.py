"""Access control: the users and ACL rules of every broker (read with the context's
credentials, through the same operations as `listUser` and `listAcl`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.operations import acl
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import Col, RowTable, plain

Row = dict[str, Any]
STYLES = {"allow": "green", "deny": "bold red", "disable": "dim", "super": "bold yellow"}


def marked(value: Any) -> Text | str:
    """Allow green, Deny red, Super yellow, disabled users dim."""
    text = plain(value)
    style = STYLES.get(str(value).lower())
    return Text(str(text), style=style) if style else text


@dataclass(frozen=True, slots=True)
class AccessView:
    users: list[Row]
    rules: list[Row]
    failures: list[str] = field(default_factory=list)


async def read_access(admin: MQAdmin) -> AccessView:
    clusters = sorted((await admin.namesrv.cluster_info()).cluster_addr_table)
    users: list[Row] = []
    rules: list[Row] = []
    failures: list[str] = []
    for cluster in clusters:
        found_users, found_rules = await asyncio.gather(
            acl.user_rows(admin, cluster=cluster), acl.acl_rows(admin, cluster=cluster))
        users += found_users.rows
        rules += found_rules.rows
        failures += sorted({f"{addr}: {str(err).splitlines()[0]}"
                            for addr, err in found_users.failures + found_rules.failures})
    for i, row in enumerate(rules):
        row["key"] = f"{i}"
    return AccessView(users, rules, failures)


class AccessScreen(DashScreen):
    TITLE: ClassVar[str] = "Access control"
    REFRESH_EVERY: ClassVar[float] = 15.0

    def body(self) -> ComposeResult:
        yield Static("Users", classes="section")
        yield RowTable([
            Col("username", "user"), Col("userType", "type", marked),
            Col("userStatus", "status", marked), Col("broker", "broker"),
        ], key=lambda r: f"{r['broker']}/{r['username']}", sort_by="username", id="users")
        yield Static("ACL rules", classes="section")
        yield RowTable([Col(c, c, marked if c == "decision" else plain)
                        for c in acl.ACL_COLUMNS],
                       key=lambda r: str(r["key"]), sort_by="subject", id="rules")
        yield Static("", id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> AccessView:
        return await read_access(admin)

    def present(self, data: AccessView) -> None:
        self.query_one("#users", RowTable).show(data.users)
        self.query_one("#rules", RowTable).show(data.rules)
        text = (f"{len(data.users)} user(s), {len(data.rules)} rule entr(ies), read with the "
                "context's credentials.  Change them with mqadmin createUser / createAcl "
                "(see docs/acl.md).")
        if data.failures:
            text += "\nNot readable: " + "; ".join(data.failures)
        self.query_one("#summary", Static).update(text)
