"""The dashboard in a real terminal: tmux (on a private socket) runs `mqadmin dashboard`
against `mqadmin dev up` processes; keys are sent with send-keys and every screen is read
back with capture-pane.  The session, the dashboard and the cluster are stopped at the end."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.dev import cluster as dev
from tests.mqadmin.cli import invoke

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

#: Key -> a text the screen shows once it has data.
SCREENS = [("2", "DemoOrders"), ("3", "demo-laggard"), ("4", "Resend and discard batches"),
           ("5", "behind (bytes)"), ("6", "fileReservedTime"), ("7", "The last 500 changes"),
           ("8", "ACL rules"), ("9", "Nothing searched yet."),
           ("0", "g choose the producer group"), ("1", "Name servers:")]


#: Seconds between two reads of the pane: another process's screen has no event to await,
#: and a capture-pane costs a few milliseconds.
POLL = 0.02


class Tmux:
    """One tmux server of our own (`-L`), so no other session is ever touched."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "dash")

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(POLL)
        raise AssertionError(f"{text!r} not shown within {timeout} s; the screen:\n{shown}")

    def wait_gone(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text in self.screen():
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} still shown after {timeout} s")
            time.sleep(POLL)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", "dash"],
                              capture_output=True, timeout=10).returncode == 0

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "dev"
    up = invoke("dev", "up", "--data-dir", str(data), "--no-traffic")
    assert up.exit_code == 0, up.stderr
    try:
        yield data
    finally:
        dev.down(data, timeout=5)


def test_every_screen_in_a_real_terminal(running: Path, tmp_path: Path) -> None:
    tmux = Tmux(f"mqadmin-test-{os.getpid()}")
    command = " ".join(shlex.quote(a) for a in (
        "env", "-u", "COLUMNS", "-u", "LINES", f"MQADMIN_HOME={os.environ['MQADMIN_HOME']}",
        "TERM=xterm-256color",
        sys.executable, "-m", "mqadmin.app", "dashboard", "--context", "dev"))
    try:
        tmux.run("-f", "/dev/null", "new-session", "-d", "-s", "dash", "-x", "160", "-y", "48",
                 command)
        tmux.run("resize-window", "-t", "dash", "-x", "160", "-y", "48")
        first = tmux.wait_for("Name servers:")
        assert "context dev" in first and "brokers 2/2 up" in tmux.wait_for("brokers 2/2 up")
        for key, text in SCREENS:
            tmux.run("send-keys", "-t", "dash", key)
            tmux.wait_for(text)
        tmux.run("send-keys", "-t", "dash", "9")
        tmux.wait_for("Nothing searched yet.")
        tmux.run("send-keys", "-t", "dash", "t")
        tmux.wait_for("Messages of a topic, newest first")
        tmux.run("send-keys", "-t", "dash", "DemoOrders")
        tmux.wait_for("DemoOrders ")  # typed into the form before Enter submits it
        tmux.run("send-keys", "-t", "dash", "Enter")
        tmux.wait_for("DemoOrders, every message kept, newest first: page 1")
        tmux.run("send-keys", "-t", "dash", ":")
        tmux.wait_for("screens:")
        tmux.run("send-keys", "-t", "dash", "topics", "Enter")
        tmux.wait_for("TPS in")
        tmux.run("send-keys", "-t", "dash", "?")
        tmux.wait_for("Keys of Topics")
        tmux.run("send-keys", "-t", "dash", "Escape")
        tmux.wait_gone("Keys of Topics")  # a q right after Esc would read as Alt+q
        tmux.run("send-keys", "-t", "dash", "q")
        deadline = time.monotonic() + 15
        while tmux.alive() and time.monotonic() < deadline:
            time.sleep(POLL)
        assert not tmux.alive(), "q did not quit the dashboard"
        status = invoke("dev", "status", "--data-dir", str(running), "-o", "json")
        assert status.exit_code == 0, status.stdout  # quitting left the cluster running
    finally:
        tmux.kill()
