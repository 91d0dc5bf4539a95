"""`ControllerManager`: one controller's state, liveness, replication, server and scans.

How this works: a request that reads or changes replica info runs under one lock: the
state machine checks it against the current state and returns an `Outcome`; its events are
committed through the `Replication` (applied on every controller) before the answer goes
out.  Only the leader answers these; a follower answers CONTROLLER_NOT_LEADER, as 5.3.3.

Elections start by themselves when a master goes inactive: its connection closes (a killed
process: at once), its heartbeats stop for their timeout, or the periodic scan finds a set
whose master is gone.  After a new master is elected, every live member of the set is told
by a oneway NOTIFY_BROKER_ROLE_CHANGED (with `notifyBrokerRoleChanged`, on by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from engine.controller.config import ControllerConfig, Peer, self_peer
from engine.controller.elect import LiveInfo
from engine.controller.liveness import BrokerKey, LiveTable
from engine.controller.replicas import Outcome, ReplicaState
from engine.controller.replication import LocalReplication, Replication
from engine.protocol.body.controller import SyncStateSet
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.controller import (
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
)
from engine.protocol.header.ha import NotifyBrokerRoleChangedRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.connection import Connection
from engine.remoting.errors import RemotingError
from engine.remoting.server import RemotingServer

log = logging.getLogger("engine.controller")

Clock = Callable[[], int]

NOT_LEADER = Outcome(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")


class ControllerManager:
    """Wires one controller; `start()` replays the state, binds the peer address, scans."""

    def __init__(self, config: ControllerConfig, *, clock: Clock,
                 replication: Replication | None = None) -> None:
        """Raises:
        ControllerConfigError: bad peers."""
        self.config = config
        self.me, self.others = self_peer(config)
        self.state = ReplicaState()
        self.live = LiveTable(clock)
        self.replication: Replication = replication or self._replication()
        self.lock = asyncio.Lock()
        self.client = RemotingClient()
        from engine.controller.handlers import build_router  # handlers import this module

        self.server: RemotingServer[ControllerManager] = RemotingServer(
            build_router(), self, host=config.bind_address, port=self.me.port,
            on_connection_closed=self._on_connection_closed, idle_timeout=None)
        self._scan: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: Set first by `stop`: closing the brokers' connections is this controller's
        #: shutdown, not their death, and must elect nobody.
        self._stopping = False
        #: Called with the broker name after each election this controller made.
        self.election_listeners: list[Callable[[str], None]] = []

    def _replication(self) -> Replication:
        if not self.others:
            return LocalReplication(self.state, self.me, self.config.store_path())
        from engine.controller.raft import RaftReplication

        return RaftReplication(self.state, self.me, self.others, self.config)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.me.host}:{self.port}"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Raises:
        ControllerStoreError: the stored state is unreadable.
        PortInUseError: the peer address is taken."""
        self._stopping = False
        await self.replication.start()
        await self.server.start()
        self._scan = asyncio.create_task(self._scan_loop(), name="controller-scan")
        log.info("controller %s serving on %s", self.me.id, self.address)

    async def stop(self) -> None:
        self._stopping = True
        if self._scan is not None:
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan
        for task in list(self._tasks):
            task.cancel()
        await self.server.stop()
        await self.client.close()
        await self.replication.stop()

    # ------------------------------------------------------------------ running requests

    async def run(self, check: Callable[[], Outcome]) -> Outcome:
        """Check a request on the current state and commit its events (leader only)."""
        if not self.replication.is_leader:
            return NOT_LEADER
        async with self.lock:
            self.replication.refresh()
            outcome = check()
            if outcome.events and not await self.replication.commit(list(outcome.events)):
                return NOT_LEADER
        return outcome

    def alive(self, broker_name: str, broker_id: int) -> bool:
        found = self.state.sets.get(broker_name)
        return found is not None and self.live.is_alive(found.cluster_name, broker_name,
                                                        broker_id)

    def metadata(self) -> GetMetaDataResponseHeader:
        leader = self.replication.leader
        peers = [self.me, *self.others]
        text = "".join(f"{p.id}:{self._address_of(p)};" for p in peers)
        return GetMetaDataResponseHeader(
            self.config.controller_d_leger_group, leader.id if leader else None,
            self._address_of(leader) if leader else None, self.replication.is_leader, text)

    def _address_of(self, peer: Peer) -> str:
        return self.address if peer.id == self.me.id else peer.address

    # ------------------------------------------------------------------ elections

    async def elect(self, req: ElectMasterRequestHeader) -> Outcome:
        found = self.state.sets.get(req.broker_name)
        cluster = found.cluster_name if found else req.cluster_name

        def live(name: str, broker_id: int) -> LiveInfo | None:
            return self.live.get(cluster, name, broker_id)

        outcome = await self.run(lambda: self.state.elect_master(
            req, live, self.config.enable_elect_unclean_master))
        if outcome.code == ResponseCode.SUCCESS:
            log.info("elected %s master of %s at epoch %s", outcome.header.master_broker_id,
                     req.broker_name, outcome.header.master_epoch)
            if self.config.notify_broker_role_changed:
                self._notify(req.broker_name, outcome)
            for listener in self.election_listeners:
                listener(req.broker_name)
        return outcome

    def _notify(self, broker_name: str, outcome: Outcome) -> None:
        found = self.state.sets.get(broker_name)
        if found is None or outcome.header.master_broker_id is None:
            return
        header = NotifyBrokerRoleChangedRequestHeader(
            outcome.header.master_address or "", outcome.header.master_epoch,
            outcome.header.sync_state_set_epoch, outcome.header.master_broker_id)
        body = SyncStateSet(found.sync_state_set, found.sync_state_set_epoch).encode()
        for broker_id, member in found.members.items():
            if self.live.is_alive(found.cluster_name, broker_name, broker_id):
                cmd = request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, to_ext(header), body,
                              oneway=True)
                self._spawn(self._send(member.address, cmd))

    async def _send(self, address: str, cmd: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(address, cmd)
        except (RemotingError, OSError) as exc:
            log.warning("cannot notify %s of its role: %s", address, exc)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_inactive(self, gone: list[BrokerKey]) -> None:
        if self._stopping or not self.replication.is_leader:
            return
        for _cluster, broker_name, broker_id in gone:
            found = self.state.sets.get(broker_name)
            if found is not None and found.master_id == broker_id:
                log.warning("master %s of %s is inactive: electing", broker_id, broker_name)
                self._spawn(self._reelect(broker_name))

    async def _reelect(self, broker_name: str) -> None:
        for _ in range(max(self.config.elect_master_max_retry_count, 1)):
            outcome = await self.elect(ElectMasterRequestHeader(broker_name=broker_name))
            if outcome.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                                ResponseCode.CONTROLLER_NOT_LEADER):
                return

    def _on_connection_closed(self, conn: Connection) -> None:
        gone = self.live.on_connection_closed(conn)
        if gone:
            self._on_inactive(gone)

    async def _scan_loop(self) -> None:
        interval = max(min(self.config.scan_not_active_broker_interval,
                           self.config.scan_inactive_master_interval), 100) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self._on_inactive(self.live.expire())
                if self.replication.is_leader:
                    self.replication.refresh()
                    for name in self.state.sets_needing_election(self.alive):
                        self._spawn(self._reelect(name))
            except Exception:  # the scan must survive a bug in one round
                log.exception("controller scan failed")
