"""How the controller's events become durable: `Replication` and its single-node form.

A `Replication` commits a batch of events (durably, on a majority) and applies them to
the `ReplicaState` it was given, in order; only the leader commits.  `LocalReplication`
is the one-controller form: leader always, an fsync'ed event log under
controllerStorePath, replayed at start.  `engine.controller.raft` is the three-controller
form.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from engine.controller.config import Peer
from engine.controller.events import Event
from engine.controller.replicas import ReplicaState
from engine.controller.store import EventLog


class Replication(Protocol):
    state: ReplicaState

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader(self) -> Peer | None: ...

    async def start(self) -> None: ...

    def refresh(self) -> None:
        """Bring `state` up to every event committed so far (followers learn them late)."""

    async def commit(self, batch: list[Event]) -> bool:
        """Commit and apply `batch`; False when this controller is not (or stopped
        being) the leader, or the commit did not reach a majority in time."""

    async def stop(self) -> None: ...


class LocalReplication:
    def __init__(self, state: ReplicaState, me: Peer, store_path: str) -> None:
        self.state = state
        self.me = me
        self.log = EventLog(store_path)

    @property
    def is_leader(self) -> bool:
        return True

    @property
    def leader(self) -> Peer | None:
        return self.me

    async def start(self) -> None:
        """Raises:
        ControllerStoreError: the log is unreadable."""
        for event in await asyncio.to_thread(self.log.load):
            self.state.apply(event)

    def refresh(self) -> None:
        return None

    async def commit(self, batch: list[Event]) -> bool:
        await asyncio.to_thread(self.log.append, batch)
        for event in batch:
            self.state.apply(event)
        return True

    async def stop(self) -> None:
        return None
