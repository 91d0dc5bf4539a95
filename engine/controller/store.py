"""The single controller's event log: one JSON event a line under controllerStorePath.

An event is appended and fsync'ed before its request is answered, and replayed in order
at start, so a controller that restarts comes back with every change it acknowledged.  A
torn last line (a crash during the write) is dropped on load.
"""

from __future__ import annotations

import os

from engine.controller import events
from engine.controller.errors import ControllerStoreError
from engine.controller.events import Event

LOG_NAME = "controller-events.log"


class EventLog:
    def __init__(self, store_path: str) -> None:
        self.path = os.path.join(store_path, LOG_NAME)

    def load(self) -> list[Event]:
        """Raises:
        ControllerStoreError: the log is unreadable or holds a line that is not an event
            (other than a torn last line)."""
        try:
            with open(self.path, "rb") as fh:
                lines = fh.read().split(b"\n")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ControllerStoreError(f"cannot read {self.path}: {exc.strerror}") from None
        torn = lines.pop()  # after the last newline: empty, or a write cut short
        if torn:
            self._truncate(sum(len(line) + 1 for line in lines))
        return [events.decode(line) for line in lines if line]

    def _truncate(self, size: int) -> None:
        with open(self.path, "r+b") as fh:
            fh.truncate(size)

    def append(self, batch: list[Event]) -> None:
        """Blocking (fsync): call it from a thread.

        Raises:
            ControllerStoreError: the log cannot be written.
        """
        data = b"".join(events.encode(e) + b"\n" for e in batch)
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ControllerStoreError(f"cannot write {self.path}: {exc.strerror}") from None
