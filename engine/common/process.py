"""What every server process does the same way: log files, stop signals, one-line errors."""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import signal
import sys


def setup_logging(logs_dir: str, filename: str) -> None:
    """Log INFO and above to a rotating file under `logs_dir`.

    Raises:
        OSError: the directory cannot be created or the file opened.
    """
    os.makedirs(logs_dir, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        os.path.join(logs_dir, filename), maxBytes=128 << 20, backupCount=10, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s - %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def catch_stop_signals() -> asyncio.Event:
    """An event set by the first SIGTERM or SIGINT from now on.

    Call it before announcing that the server is up, so a signal sent in reply to the
    announcement is never handled by the default action (killing the process uncleanly).
    """
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    return stop


def error(prog: str, message: str) -> int:
    """Print ``prog: error: message`` on stderr; returns the exit code 1."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 1
