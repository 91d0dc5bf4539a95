"""`ControllerModeService`: a broker under a 5.3 controller (`enableControllerMode=true`).

How this works (5.3.3 `ReplicasManager`, reduced to what this engine's roles need):

* Identity: the first start asks the controller for the set's next id and applies for it
  with the check code `address;millis`, kept in `<config dir>/controllerBrokerId.json`; a
  restart reuses it.  The name servers still see brokerId 0 for the master and the
  controller id for a slave.
* Start: writes are refused until the controller says who the master is.  REGISTER_BROKER;
  when the set has no master, ELECT_MASTER with this broker's id; then the role is adopted
  (below).
* Every `brokerHeartbeatInterval`: BROKER_HEARTBEAT to every controller (epoch, max
  offset, `brokerElectionPriority`), on a clock of its own as 5.3.3's broker sends them; and
  a round: GET_REPLICA_INFO from the leader, a master or epoch other than this broker's
  adopted.  A round can wait (up to its 3 s timeout) on a controller busy committing an
  election; heartbeats waiting with it would lapse, and the controller would take this live
  broker for dead once the election is done.  NOTIFY_BROKER_ROLE_CHANGED from the
  controller is adopted at once.
* Adopting: this broker named master: promote to that epoch (a new epoch starts at its log
  end).  Another broker named: refuse writes at once, read the new master's epoch history
  (GET_BROKER_EPOCH_CACHE) and its HA address (GET_BROKER_HA_STATUS), drop this log's
  bytes past the first epoch after this broker's own (where the logs diverged), replicate
  from it.  So a master that comes back with an older epoch (after a freeze, a partition or
  a restart) never serves as master again: it truncates and follows.
* A master checks its SyncStateSet every `checkSyncStateSetPeriod`: a slave that has
  reached this log's end of the previous check (and the current epoch's start) is caught up;
  one not caught up for `haMaxTimeSlaveNotCatchup` leaves the set, a caught-up one joins
  (CONTROLLER_ALTER_SYNC_STATE_SET).  With `allAckInSyncStateSet`, a SYNC_MASTER put waits
  for as many slaves as the set has other members (0: none); a SYNC_MASTER whose set is
  smaller than `minInSyncReplicas` refuses writes until it grows: the store's
  IN_SYNC_REPLICAS_NOT_ENOUGH, answered as 5.3.3 does (SYSTEM_ERROR, "in-sync replicas not
  enough").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.broker.controller_client import ControllerClient, ControllerUnavailable
from engine.broker.state import BrokerState
from engine.ha.status import HARuntimeInfo
from engine.protocol import fastjson
from engine.protocol.body.controller import (
    BrokerReplicasInfo,
    EpochEntryCache,
    SyncStateSet,
    encode_broker_names,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from engine.protocol.header.ha import NotifyBrokerRoleChangedRequestHeader, truncate_offset_after
from engine.protocol.wire import from_json
from engine.remoting.errors import RemotingError
from engine.store.config import BrokerRole
from engine.store.errors import ConfigFileError

if TYPE_CHECKING:
    from engine.broker.role import RoleManager

log = logging.getLogger("engine.broker.controller_mode")

IDENTITY_FILE = "controllerBrokerId.json"
AWAITING_CONTROLLER = "awaiting the controller's word on who the master of "
IN_SYNC_NOT_ENOUGH = "in-sync replicas not enough: "
Clock = Callable[[], int]


class ControllerModeService:
    def __init__(self, state: BrokerState, roles: RoleManager, master_role: BrokerRole,
                 clock: Clock) -> None:
        self.state = state
        self.roles = roles
        self.master_role = (master_role if master_role is not BrokerRole.SLAVE
                            else BrokerRole.ASYNC_MASTER)
        self.clock = clock
        self.controllers = ControllerClient(state.client, state.config.controller_addr)
        self.identity_path = os.path.join(state.store_config.config_dir, IDENTITY_FILE)
        self.broker_id: int | None = None
        self.registered = False
        self.sync_state_set: frozenset[int] = frozenset()
        self._caught_up: dict[int, int] = {}
        #: Each following slave's end of its HA connection (by broker id), from its HA status.
        self._ha_conn_of: dict[int, str] = {}
        self._last_check_ms = 0
        self._last_check_max = 0
        self._master_since_ms = 0
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def fence(self) -> None:
        """Refuse writes until the controller names the master (before serving)."""
        self.state.store.writes_refused = AWAITING_CONTROLLER + self.state.config.broker_name

    async def start(self) -> None:
        """Register with the controllers (once they answer) and keep in touch with them."""
        try:
            await self._register()
        except (ControllerUnavailable, RemotingError, ProtocolError) as exc:
            log.warning("not registered with the controllers yet: %s (retrying)", exc)
        self._task = asyncio.create_task(self._run(), name="controller-mode")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        interval = max(self.state.config.broker_heartbeat_interval, 50) / 1000
        beats = asyncio.create_task(self._beat(interval), name="controller-heartbeats")
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.tick()
                except (ControllerUnavailable, RemotingError, ProtocolError, OSError) as exc:
                    log.warning("controller round failed: %s", exc)
                except Exception:  # the loop must outlive a bug in one round
                    log.exception("controller round failed")
        finally:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats

    async def _beat(self, interval: float) -> None:
        """Heartbeats, whatever the rounds wait on (a registered broker's only)."""
        while True:
            await asyncio.sleep(interval)
            if not self.registered:
                continue
            try:
                await self._heartbeat()
            except Exception:  # a heartbeat lost is the next one's to make up
                log.exception("controller heartbeat failed")

    async def tick(self) -> None:
        if not self.registered:
            await self._register()
            return
        answer = await self.controllers.call(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                             GetReplicaInfoRequestHeader(self._name))
        if answer.code != ResponseCode.SUCCESS:
            log.warning("GET_REPLICA_INFO: %s %s", answer.code, answer.remark)
            self.registered = answer.code != ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
            return
        master_id, master_addr, epoch = _master_of(answer.ext_fields or {})
        if master_id is None:
            await self._elect()
            return
        await self.adopt(master_id, master_addr, epoch)
        period = self.state.config.check_sync_state_set_period
        if not self.state.is_slave and self.clock() - self._last_check_ms >= period:
            await self.check_sync_state_set()

    # ------------------------------------------------------------------ registration

    @property
    def _name(self) -> str:
        return self.state.config.broker_name

    def _load_identity(self) -> int | None:
        try:
            with open(self.identity_path, encoding="utf-8") as fh:
                return int(json.load(fh)["brokerId"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigFileError(f"{self.identity_path} is unreadable ({exc}); delete it to "
                                  "apply for a new id") from None

    def _save_identity(self, broker_id: int, check_code: str) -> None:
        tmp = self.identity_path + ".tmp"
        os.makedirs(os.path.dirname(self.identity_path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"brokerId": broker_id, "registerCheckCode": check_code}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.identity_path)

    async def _apply_for_id(self) -> int:
        cfg = self.state.config
        while True:
            answer = await self.controllers.call(
                RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                GetNextBrokerIdRequestHeader(cfg.broker_cluster_name, cfg.broker_name))
            next_id = int((answer.ext_fields or {}).get("nextBrokerId", "1"))
            check_code = f"{cfg.broker_addr};{self.clock()}"
            answer = await self.controllers.call(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(cfg.broker_cluster_name, cfg.broker_name, next_id,
                                           check_code))
            if answer.code == ResponseCode.SUCCESS:
                self._save_identity(next_id, check_code)
                log.info("applied for controller broker id %d of %s", next_id, cfg.broker_name)
                return next_id
            if answer.code != ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                raise ControllerUnavailable(f"APPLY_BROKER_ID: {answer.code} {answer.remark}")

    async def _register(self) -> None:
        cfg = self.state.config
        if self.broker_id is None:
            self.broker_id = self._load_identity() or await self._apply_for_id()
        await self._heartbeat()
        answer = await self.controllers.call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            RegisterBrokerToControllerRequestHeader(cfg.broker_cluster_name, cfg.broker_name,
                                                    self.broker_id, cfg.broker_addr))
        if answer.code != ResponseCode.SUCCESS:
            raise ControllerUnavailable(f"REGISTER_BROKER: {answer.code} {answer.remark}")
        self.registered = True
        master_id, master_addr, epoch = _master_of(answer.ext_fields or {})
        if master_id is None:
            await self._elect()
        else:
            await self.adopt(master_id, master_addr, epoch)

    async def _elect(self) -> None:
        cfg = self.state.config
        assert self.broker_id is not None
        answer = await self.controllers.call(
            RequestCode.CONTROLLER_ELECT_MASTER,
            ElectMasterRequestHeader(cfg.broker_cluster_name, cfg.broker_name, self.broker_id,
                                     False, self.clock()))
        if answer.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
            master_id, master_addr, epoch = _master_of(answer.ext_fields or {})
            if master_id is not None:
                await self.adopt(master_id, master_addr, epoch)
        else:
            log.info("no master elected for %s yet: %s", cfg.broker_name, answer.remark)

    async def _heartbeat(self) -> None:
        cfg = self.state.config
        store = self.state.store
        await self.controllers.heartbeat(BrokerHeartbeatRequestHeader(
            cfg.broker_cluster_name, cfg.broker_addr, cfg.broker_name, self.broker_id,
            self.roles.epoch, store.get_max_phy_offset(), store.get_max_phy_offset(),
            cfg.controller_heart_beat_timeout_mills, cfg.broker_election_priority))

    # ------------------------------------------------------------------ roles

    async def on_notify(self, header: NotifyBrokerRoleChangedRequestHeader) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED from a controller."""
        await self.adopt(header.master_broker_id, header.master_address, header.master_epoch)

    async def adopt(self, master_id: int | None, master_addr: str | None, epoch: int) -> None:
        """Take the role the controller gives this broker (master `master_id` at `epoch`)."""
        if master_id is None or not master_addr or self.broker_id is None:
            return
        st = self.state
        async with self._lock:
            if epoch < self.roles.epoch:
                return  # an older word than this broker already acted on
            if master_id == self.broker_id:
                if st.is_slave or self.roles.epoch < epoch:
                    await self.roles.become_master(epoch, self.master_role)
                    self._master_since_ms = self._last_check_ms = self.clock()
                    self._caught_up.clear()
                    self._ha_conn_of.clear()
                    self._set_required_acks(frozenset({self.broker_id}))
                if (st.store.writes_refused or "").startswith(AWAITING_CONTROLLER):
                    st.store.writes_refused = None
                return
            following = st.ha_client is not None and st.ha_client.running
            if (st.is_slave and st.master_addr == master_addr and self.roles.epoch == epoch
                    and following):
                return
            if not st.is_slave:
                st.store.writes_refused = (f"fenced: {master_addr} is master of epoch {epoch}"
                                           f" (this broker's epoch is {self.roles.epoch})")
            elif st.master_addr != master_addr:
                await self.roles.stop_following()  # the old master gets no more acks
            truncate, ha_addr = await self._master_facts(master_addr, epoch)
            await self.roles.become_slave(master_addr, ha_addr, self.broker_id, epoch, truncate)

    async def _master_facts(self, master_addr: str,
                            epoch: int) -> tuple[int | None, str | None]:
        """Where this log diverges from the new master's (by its epoch history), and the
        master's HA address.

        Raises:
            ControllerUnavailable: the master does not answer, or has not begun `epoch` yet
                (told of its election before it promoted itself): without that epoch's start
                the divergence cannot be known, and bytes this log holds past it (written by
                the old master, never acknowledged) would stay under the new master's.  The
                next round asks again.
        """
        client = self.state.client
        answer = await client.invoke(master_addr, request(RequestCode.GET_BROKER_EPOCH_CACHE),
                                     3.0)
        if answer.code != ResponseCode.SUCCESS:
            raise ControllerUnavailable(f"the new master {master_addr} did not give its epochs:"
                                        f" {answer.remark}")
        cache = from_json(EpochEntryCache, fastjson.loads(answer.body or b"{}"))
        history = {e.epoch: e.start_offset for e in cache.epoch_list}
        if epoch not in history:
            raise ControllerUnavailable(f"the new master {master_addr} has not begun epoch "
                                        f"{epoch} yet (its last is {max(history, default=0)})")
        truncate = truncate_offset_after(history, self.roles.epoch)
        ha_addr: str | None = None
        status = await client.invoke(master_addr, request(RequestCode.GET_BROKER_HA_STATUS),
                                     3.0)
        if status.code == ResponseCode.SUCCESS and status.body:
            ha_addr = HARuntimeInfo.decode(status.body).ha_server_addr or None
        return truncate, ha_addr

    # ------------------------------------------------------------------ SyncStateSet

    def _set_required_acks(self, sync_state_set: frozenset[int]) -> None:
        self.sync_state_set = sync_state_set
        self._check_min_in_sync()
        ha = self.state.ha
        if ha is None or not self.state.config.all_ack_in_sync_state_set:
            return
        ha.required_acks = max(len(sync_state_set) - 1, 0)
        # every other member by name: a member whose connection is not known yet (or an
        # acknowledgement from a slave outside the set) acknowledges nothing
        ha.required_slaves = frozenset(self._ha_conn_of.get(rid, f"unknown broker {rid}")
                                       for rid in sync_state_set if rid != self.broker_id)

    def _check_min_in_sync(self) -> None:
        """A SYNC_MASTER refuses writes while its SyncStateSet is below minInSyncReplicas."""
        st = self.state
        need = st.config.min_in_sync_replicas
        short = (not st.is_slave and st.store_config.broker_role is BrokerRole.SYNC_MASTER
                 and len(self.sync_state_set) < need)
        st.store.in_sync_replicas_short = (
            f"{IN_SYNC_NOT_ENOUGH}the SyncStateSet has {len(self.sync_state_set)} member(s), "
            f"minInSyncReplicas is {need}") if short else None

    async def check_sync_state_set(self) -> None:
        """Shrink or expand this master's SyncStateSet by its slaves' progress."""
        st = self.state
        now = self.clock()
        answer = await self.controllers.call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                             body=encode_broker_names([self._name]))
        table = from_json(BrokerReplicasInfo, fastjson.loads(answer.body or b"{}"))
        info = table.replicas_info_table.get(self._name)
        if info is None or info.master_broker_id != self.broker_id:
            return
        current = frozenset(r.broker_id for r in info.in_sync_replicas if r.broker_id is not None)
        mark, self._last_check_max = self._last_check_max, st.store.get_max_phy_offset()
        self._last_check_ms = now
        for replica in [*info.in_sync_replicas, *info.not_in_sync_replicas]:
            if replica.broker_id in (None, self.broker_id) or not replica.alive:
                continue
            offset, conn = await self._slave_offset(replica.broker_address)
            if conn is not None:
                self._ha_conn_of[replica.broker_id] = conn
            if offset is not None and offset >= max(mark, self.roles.epoch_start_offset):
                self._caught_up[replica.broker_id] = now
        self._set_required_acks(current)
        assert self.broker_id is not None
        limit = st.config.ha_max_time_slave_not_catchup
        new = {self.broker_id}
        for replica in [*info.in_sync_replicas, *info.not_in_sync_replicas]:
            rid = replica.broker_id
            if rid is None or rid == self.broker_id:
                continue
            last = self._caught_up.get(rid)
            keep = rid in current and now - (last or self._master_since_ms) < limit
            if keep or (rid not in current and last == now):
                new.add(rid)
        if frozenset(new) == current:
            return
        altered = await self.controllers.call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(self._name, self.broker_id, self.roles.epoch, now),
            SyncStateSet(frozenset(new), info.sync_state_set_epoch).encode())
        if altered.code == ResponseCode.SUCCESS:
            log.info("SyncStateSet of %s: %s -> %s", self._name, sorted(current), sorted(new))
            self._set_required_acks(frozenset(new))
        else:
            log.warning("ALTER_SYNC_STATE_SET refused: %s %s", altered.code, altered.remark)

    async def _slave_offset(self, address: str | None) -> tuple[int | None, str | None]:
        """A slave's commit-log max offset and its end of its HA connection to this master
        (None, None: it does not answer or does not follow this master's epoch)."""
        if not address:
            return None, None
        try:
            answer = await self.state.client.invoke(
                address, request(RequestCode.GET_BROKER_HA_STATUS), 2.0)
        except (RemotingError, OSError):
            return None, None
        if answer.code != ResponseCode.SUCCESS or not answer.body:
            return None, None
        info = HARuntimeInfo.decode(answer.body)
        if info.master or info.epoch != self.roles.epoch:
            return None, None  # not (yet) following this master
        client = info.ha_client_runtime_info
        return info.commit_log_max_offset, client.local_addr if client.is_activated else None


def _master_of(ext: dict[str, str]) -> tuple[int | None, str | None, int]:
    """(masterBrokerId, masterAddress, masterEpoch) of an answer's ext fields."""
    raw = ext.get("masterBrokerId")
    master_id = int(raw) if raw not in (None, "") else None
    return master_id, ext.get("masterAddress") or None, int(ext.get("masterEpoch") or 0)
