"""The dashboard app: one mode per screen, k9s's keys, the header's health loop, read-only.

How this works: each screen is a Textual mode (its own stack), reached by a number key or
the `:` command line; `Esc` closes the filter, then pops a drill-down, then goes back to
the previous screen.  The app owns the `Backend` (the thread that talks to the cluster),
the header's state (context, health, last refresh) and `--readonly`: every screen asks
`allow_change` before opening a change dialog.  Given several clusters (`fleet`), it opens
on the Fleet screen, one row per cluster; Enter there points the backend at that cluster
and starts its screens afresh (no screen keeps another cluster's rows), and the header
names the cluster every screen shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from mqadmin.config import Endpoint, resolve
from mqadmin.exit_codes import message_for
from mqadmin.tui.backend import Backend
from mqadmin.tui.data.fleet import Fleet, label
from mqadmin.tui.data.health import read_extra, read_health
from mqadmin.tui.events import HealthChanged
from mqadmin.tui.keys import key_sections
from mqadmin.tui.screens.access import AccessScreen
from mqadmin.tui.screens.audit import AuditScreen
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.cleanup import CleanupScreen
from mqadmin.tui.screens.cluster import ClusterScreen
from mqadmin.tui.screens.dlq import DlqScreen
from mqadmin.tui.screens.fleet import FleetScreen
from mqadmin.tui.screens.groups import GroupsScreen
from mqadmin.tui.screens.message_search import MessageSearchScreen
from mqadmin.tui.screens.producers import ProducersScreen
from mqadmin.tui.screens.replication import ReplicationScreen
from mqadmin.tui.screens.topics import TopicsScreen
from mqadmin.tui.widgets.dialogs import CommandLine, KeyList
from mqadmin.tui.widgets.header import extra_line, health_line

#: Screen name -> (palette words, number key).
SCREENS: dict[str, tuple[tuple[str, ...], str]] = {
    "cluster": (("cluster", "brokers"), "1"),
    "topics": (("topics", "topic", "tp"), "2"),
    "groups": (("groups", "group", "cg", "consumers", "lag"), "3"),
    "dlq": (("dlq", "deadletters", "dead"), "4"),
    "ha": (("replication", "ha"), "5"),
    "cleanup": (("cleanup", "clean"), "6"),
    "audit": (("audit",), "7"),
    "access": (("access", "acl", "users"), "8"),
    "messages": (("messages", "message", "msg"), "9"),
    "producers": (("producers", "producer"), "0"),
    "fleet": (("fleet", "clusters"), "F"),
}
HEALTH_EVERY = 5.0
#: The slower half of the header (lag verdicts, dead letters) every this many rounds.
EXTRA_EVERY = 3
#: The slower half's first read comes this soon after the first round (the screen's data is
#: in by then), not a whole round later.
EXTRA_FIRST_AFTER = 1.0


class Dashboard(App[None]):
    """`mqadmin dashboard`."""

    TITLE = "mqadmin dashboard"
    CSS_PATH = Path(__file__).with_name("dashboard.tcss")
    MODES: ClassVar[dict[str, type[DashScreen]]] = {  # type: ignore[assignment]
        "cluster": ClusterScreen, "topics": TopicsScreen, "groups": GroupsScreen,
        "dlq": DlqScreen, "ha": ReplicationScreen, "cleanup": CleanupScreen,
        "audit": AuditScreen, "access": AccessScreen, "messages": MessageSearchScreen,
        "producers": ProducersScreen, "fleet": FleetScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("colon", "command_line", "Command", key_display=":"),
        Binding("question_mark", "keys", "Keys", key_display="?"),
        Binding("escape", "go_back", "Back", show=False),
        Binding("q", "quit", "Quit"),
        *(Binding(key, f"show('{name}')", f"show {label}", show=False)
          for name, ((label, *_), key) in SCREENS.items()),
    ]

    health: reactive[Text | str] = reactive("")
    refreshed_at: reactive[str] = reactive("")
    where: reactive[str] = reactive("")
    readonly: reactive[bool] = reactive(False)

    def __init__(self, endpoint: Endpoint, *, readonly: bool = False,
                 start: str | None = None, fleet: Sequence[Endpoint] = ()) -> None:
        super().__init__()
        self.backend = Backend(endpoint)
        #: The clusters of the Fleet screen (just `endpoint` when none were given).
        self.fleet = Fleet(fleet or [endpoint])
        self.set_reactive(Dashboard.readonly, readonly)
        self.start_mode = start or ("fleet" if len(self.fleet.endpoints) > 1 else "cluster")
        self.set_reactive(Dashboard.where, self._where_text(endpoint))
        self._history: list[str] = []
        self._health_wake = asyncio.Event()
        self._health_started = False

    @staticmethod
    def _where_text(endpoint: Endpoint) -> str:
        context = f"context {endpoint.context}" if endpoint.context else "no context"
        return f"{context}  ·  name servers {endpoint.text}"

    def _fleet_text(self) -> str:
        names = [label(e) for e in self.fleet.endpoints]
        return f"fleet of {len(names)} cluster{'' if len(names) == 1 else 's'}: {', '.join(names)}"

    def on_mount(self) -> None:
        self.mode_change_signal.subscribe(self, self._mode_changed)
        self.switch_mode(self.start_mode)
        # The header's reads start once the first screen has its data (or after a second):
        # the first paint does not share the backend with them.
        self.set_timer(1.0, self._start_health)

    def _start_health(self) -> None:
        if not self._health_started:
            self._health_started = True
            self.health_loop()

    def on_unmount(self) -> None:
        with contextlib.suppress(Exception):  # best effort: the process is ending anyway
            self.backend.call_sync(self.fleet.close, 5)
        self.backend.close()

    # ------------------------------------------------------------------ navigation

    def action_show(self, name: str) -> None:
        if name not in self.MODES or name == self.current_mode:
            return
        self._history.append(self.current_mode)
        self.switch_mode(name)

    def _mode_changed(self, _: str) -> None:
        """The header names the fleet on the Fleet screen, the cluster everywhere else."""
        self.where = (self._fleet_text() if self.current_mode == "fleet"
                      else self._where_text(self.backend.endpoint))
        self._health_wake.set()

    @work(exclusive=True, group="context")
    async def open_cluster(self, name: str) -> None:
        """The Fleet screen's Enter: the screens of the cluster called `name` (a context,
        or name servers), started afresh."""
        endpoint = next((e for e in self.fleet.endpoints if label(e) == name), None)
        if endpoint is None:
            return
        if endpoint != self.backend.endpoint:
            await self.backend.switch(endpoint)
            await self._restart_modes()
        self.health = ""
        self._history = ["fleet"]
        self.switch_mode("cluster")
        self.where = self._where_text(endpoint)
        self._health_wake.set()

    async def _restart_modes(self) -> None:
        """Drop every screen but the one shown, so none shows the previous cluster's rows."""
        for mode, screen in self.MODES.items():
            if mode != self.current_mode and mode != "fleet":
                with contextlib.suppress(Exception):  # a mode never opened
                    await self.remove_mode(mode)
                self.add_mode(mode, screen)

    def action_go_back(self) -> None:
        screen = self.screen
        if isinstance(screen, DashScreen) and screen.back():
            return
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self._history:
            self.switch_mode(self._history.pop())

    def action_command_line(self) -> None:
        words = sorted({w for names, _ in SCREENS.values() for w in names} |
                       {"quit", "context "})
        hint = ("screens: " + "  ".join(f":{names[0]}" for names, _ in SCREENS.values())
                + "   :context NAME   :quit")
        self.push_screen(CommandLine(words, hint), self.run_command)

    def run_command(self, command: str | None) -> None:
        if not command:
            return
        word, _, rest = command.partition(" ")
        word = word.lower()
        if word in ("q", "quit", "q!"):
            self.exit()
            return
        if word in ("context", "ctx"):
            self.use_context(rest.strip())
            return
        for name, (words, _) in SCREENS.items():
            if word in words:
                self.action_show(name)
                return
        self.notify(f"unknown command ':{command}'. Type : and Tab through the suggestions, "
                    "or press ? for the keys.", severity="error")

    def action_keys(self) -> None:
        screen = self.screen
        # a drill-down screen's heading ends with how to leave it; the key list says that
        heading = screen.heading().removesuffix("  (Esc: back)") \
            if isinstance(screen, DashScreen) else ""
        title = heading or self.current_mode
        self.push_screen(KeyList(title, key_sections(self, screen, title)))

    # ------------------------------------------------------------------ context

    @work(exclusive=True, group="context")
    async def use_context(self, name: str) -> None:
        if not name:
            self.notify("usage: :context NAME (the contexts of `mqadmin context list`)",
                        severity="error")
            return
        try:
            endpoint = await self.backend.blocking(lambda: resolve(None, name))
        except Exception as exc:
            self.notify(message_for(exc), severity="error")
            return
        await self.backend.switch(endpoint)
        await self._restart_modes()
        self.where = self._where_text(endpoint)
        self.notify(f"now on context {name} ({endpoint.text})")
        self._health_wake.set()
        screen = self.screen
        if isinstance(screen, DashScreen):
            screen.action_refresh_now()

    # ------------------------------------------------------------------ header

    def refreshed(self) -> None:
        self.refreshed_at = time.strftime("%H:%M:%S")
        self._start_health()

    @work(exclusive=True, group="health")
    async def health_loop(self) -> None:
        extra = Text()
        rounds = 0
        while True:
            self._health_wake.clear()
            if self.current_mode == "fleet":  # the rows are the health: nothing to add
                self.post_message(HealthChanged(Text("one row per cluster below", style="dim"),
                                                True))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._health_wake.wait(), HEALTH_EVERY)
                continue
            try:
                text, ok = health_line(await self.backend.call(read_health)), True
            except Exception as exc:
                text, ok = Text(f"cluster unreachable: {message_for(exc)}", style="bold red"), \
                    False
            if ok and rounds % EXTRA_EVERY == 1:  # not in the first round: the screen first
                try:
                    extra = extra_line(await self.backend.call(
                        functools.partial(read_extra, endpoint=self.backend.endpoint)))
                except Exception as exc:
                    extra = Text(f"  ·  dead letters / lag: {message_for(exc)}", style="dim")
            rounds += 1
            self.post_message(HealthChanged(text + extra if ok else text, ok))
            pause = HEALTH_EVERY if ok else HEALTH_EVERY * 2
            if ok and rounds == 1:
                pause = EXTRA_FIRST_AFTER
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._health_wake.wait(), pause)

    def on_health_changed(self, message: HealthChanged) -> None:
        self.health = message.text

    # ------------------------------------------------------------------ changes

    def allow_change(self, what: str) -> bool:
        """False (and says why) in read-only mode."""
        if self.readonly:
            self.notify(f"read-only mode: {what} refused. Restart the dashboard without "
                        "--readonly to change the cluster.", severity="error")
            return False
        return True
