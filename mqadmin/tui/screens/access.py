"""Access control: the users and ACL rules of every broker (tui/data/access.py), allow in
green and deny in red."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.operations.acl import v2 as acl
from mqadmin.tui.data.access import AccessView, read_access
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.widgets.table import Col, RowTable, plain

STYLES = {"allow": "green", "deny": "bold red", "disable": "dim", "super": "bold yellow"}


def marked(value: Any) -> Text | str:
    """Allow green, Deny red, Super yellow, disabled users dim."""
    text = plain(value)
    style = STYLES.get(str(value).lower())
    return Text(str(text), style=style) if style else text


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
