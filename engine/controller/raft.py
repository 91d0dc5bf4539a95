"""Three (or more) controllers replicating their events through Raft (pysyncobj).

How this works: the replicated value is pysyncobj's `ReplList` of encoded events, the
controller's whole history in commit order.  The leader's `commit` extends it and waits for
pysyncobj's callback (majority commit); every controller then applies the entries it has not
applied yet to its `ReplicaState` (`refresh`, on the asyncio thread, before each read or
check).  pysyncobj keeps its journal and full dumps under controllerStorePath, so the
history survives a restart of every controller.

A controller elected leader answers as leader only once an entry of its own term has been
applied: until then it may not have applied, or even know as committed, what the previous
leader committed, and would answer reads and checks from an older state (a broker id given
twice, an election on a stale epoch).  5.3.3's DLedger controller waits the same way, with an
empty proposal, before it takes the leader's role; meanwhile it answers CONTROLLER_NOT_LEADER.

Raft traffic goes to each peer's port + 1 (`Peer.raft_address`); the peer's own address
answers remoting requests, as 5.3.3's DLedger peer address does.  pysyncobj runs its own
thread; the only things shared with the asyncio thread are the list (appended by
pysyncobj, read by slices here) and the leader flag.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.batteries import ReplList

from engine.controller import events
from engine.controller.config import ControllerConfig, Peer
from engine.controller.events import Event
from engine.controller.replicas import ReplicaState

#: How long a commit may wait for a majority before the leader gives up on it.
COMMIT_TIMEOUT_S = 5.0
#: A leader's barrier not applied after this long is proposed again (pysyncobj answers a
#: proposal only once its log index is applied, which a leader that lost its term and won
#: another may never see).
BARRIER_RETRY_S = 2.0


class RaftReplication:
    def __init__(self, state: ReplicaState, me: Peer, others: list[Peer],
                 config: ControllerConfig) -> None:
        self.state = state
        self.me = me
        self.peers = {p.raft_address: p for p in (me, *others)}
        self.store_path = config.store_path()
        self.others = others
        self.entries = ReplList()
        self.applied = 0
        self.sync: SyncObj | None = None
        #: The term whose barrier (an empty extend) this controller has applied as leader, and
        #: the term and time of the barrier it last proposed.
        self._ready_term = -1
        self._barrier_term = -1
        self._barrier_at = 0.0

    async def start(self) -> None:
        os.makedirs(self.store_path, exist_ok=True)
        conf = SyncObjConf(
            journalFile=os.path.join(self.store_path, "raft.journal"),
            fullDumpFile=os.path.join(self.store_path, "raft.dump"),
            dynamicMembershipChange=False, commandsWaitLeader=False)
        self.sync = SyncObj(self.me.raft_address, [p.raft_address for p in self.others],
                            conf, consumers=[self.entries])

    async def stop(self) -> None:
        if self.sync is not None:
            sync, self.sync = self.sync, None
            await asyncio.to_thread(sync.destroy_synchronous)

    @property
    def is_leader(self) -> bool:
        """Raft's leader whose own term's barrier is applied (proposed on the first call)."""
        sync = self.sync
        if sync is None or not sync._isLeader():
            return False
        term = sync._getTerm()
        if self._ready_term == term:
            return True
        if self._barrier_term != term or time.monotonic() - self._barrier_at > BARRIER_RETRY_S:
            self._barrier_term, self._barrier_at = term, time.monotonic()

            def applied(_result: Any, error: int) -> None:  # on pysyncobj's thread
                if error == FAIL_REASON.SUCCESS:
                    self._ready_term = term
                elif self._barrier_term == term:
                    self._barrier_term = -1  # proposed again on the next call

            self.entries.extend([], callback=applied)
        return False

    @property
    def leader(self) -> Peer | None:
        node = self.sync._getLeader() if self.sync is not None else None
        return self.peers.get(getattr(node, "address", str(node))) if node else None

    def refresh(self) -> None:
        """Apply the entries committed since the last call."""
        new = self.entries.rawData()[self.applied:]
        for data in new:
            self.state.apply(events.decode(data))
        self.applied += len(new)

    async def commit(self, batch: list[Event]) -> bool:
        if self.sync is None or not self.is_leader:
            return False
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def finished(_result: Any, error: int) -> None:
            loop.call_soon_threadsafe(_settle, done, error)

        self.entries.extend([events.encode(e) for e in batch], callback=finished)
        try:
            error = await asyncio.wait_for(done, COMMIT_TIMEOUT_S)
        except TimeoutError:
            return False
        self.refresh()
        return bool(error == FAIL_REASON.SUCCESS)


def _settle(future: asyncio.Future[int], error: int) -> None:
    if not future.done():
        future.set_result(error)
