"""`RoleManager`: a broker's replication role — its services, role changes, epoch fencing.

How this works: every broker listens on its HA port (`HAService`, which turns slaves away
while this broker is itself a slave).  A slave also runs the `HAClient` (replicating from
haMasterAddress, else its master's HA address learned at registration) and the
`SlaveSyncService`.

Role changes (NOTIFY_BROKER_ROLE_CHANGED, or a name server's fencing verdict) run one at a
time under a lock:
  * `become_master(epoch)`: a last metadata sync when the old master still answers, stop
    the slave services, drop a partial record at the end of the log, take the queue offsets
    from the queues, start epoch `epoch` at the log's end, brokerId 0, register everywhere
    (a topic the synced config lacks is not created, whatever queues the store has);
  * `become_slave(master, id, epoch, truncate_to)`: refuse writes at once, close this
    broker's own slaves, truncate a diverged tail, brokerId `id`, start replicating from
    the new master, register everywhere.
Each change is written to the role file first thing after it is made (`role_file.py`),
which `load()` reads at start, so the role survives restarts.

Fencing: registrations carry the epoch and its history; this engine's name servers refuse
a master whose epoch is behind (see `engine.namesrv.epochs`).  A master refuses writes from
start until a name server confirmed it (when name servers are configured; registration is
retried every second until one answers), and demotes itself — truncating its log where
the newer epochs began — when one refuses it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from engine.broker.registration import NamesrvRegistration, Registration
from engine.broker.slave_sync import SlaveSyncService
from engine.broker.state import BrokerState
from engine.broker.topics import KEEP_QUEUES_OF
from engine.ha.client import HAClient
from engine.ha.role_file import RoleRecord, load_role, role_path, save_role
from engine.ha.status import HAClientRuntimeInfo, HARuntimeInfo, average_record_size
from engine.protocol.header.ha import (
    EXT_BROKER_ID,
    EXT_EPOCH,
    EXT_EPOCHS,
    EXT_FENCED,
    EXT_TRUNCATE_OFFSET,
    decode_epochs,
    encode_epochs,
)
from engine.store.config import BrokerRole

log = logging.getLogger(__name__)

AWAITING = "awaiting confirmation by a name server that this broker is the master of "
FENCED = "writes fenced: "
RETRY_UNCONFIRMED_S = 1.0  # registration retry while no name server confirmed this master
LAST_SYNC_S = 2.0  # a promotion waits this long at most for a last metadata sync


class RoleError(Exception):
    """A role change that cannot be made; the message says why."""


class RoleManager:
    def __init__(self, state: BrokerState, registration: NamesrvRegistration) -> None:
        self.state = state
        self.registration = registration
        cfg = state.config
        state.ha_client = HAClient(
            state.store, self.ha_master_addr,
            heartbeat_interval_ms=cfg.ha_send_heartbeat_interval,
            housekeeping_interval_ms=cfg.ha_housekeeping_interval,
            reconnect_interval_ms=cfg.ha_reconnect_interval)
        self.sync = SlaveSyncService(state, cfg.slave_sync_interval / 1000)
        self.path = role_path(state.store_config.config_dir)
        self.epoch = 0
        self.epoch_start_offset = 0
        self.history: dict[int, int] = {}
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        registration.extra_fields = self.registration_fields
        registration.on_registered = self.on_registered

    def ha_master_addr(self) -> str | None:
        st = self.state
        return st.config.fixed_ha_master_address or st.ha_master_addr

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Adopt the persisted role, if any (before the broker serves anything).

        Raises:
            RoleFileError: the role file cannot be read.
        """
        record = load_role(self.path)
        if record is None:
            return
        st = self.state
        role = BrokerRole(record.broker_role)
        if (role, record.broker_id) != (st.store_config.broker_role, st.config.broker_id):
            log.warning("starting as %s with brokerId %d (the role it last had, from %s), "
                        "not as %s %d of the config file", role.value, record.broker_id,
                        self.path, st.store_config.broker_role.value, st.config.broker_id)
        st.store_config.broker_role = role
        st.config = dataclasses.replace(st.config, broker_id=record.broker_id)
        self.epoch, self.epoch_start_offset = record.epoch, record.epoch_start_offset
        self.history = dict(record.epochs)

    def fence_until_confirmed(self) -> None:
        """A master with name servers refuses writes until one of them confirms it."""
        st = self.state
        if not st.is_slave and st.config.namesrv_addrs:
            st.store.writes_refused = AWAITING + st.config.broker_name

    async def start(self) -> None:
        if self.state.is_slave:
            self._start_slave_services()

    async def stop(self) -> None:
        for task in list(self._tasks):
            await task
        await self._stop_slave_services()

    def _start_slave_services(self) -> None:
        assert self.state.ha_client is not None
        self.state.ha_client.start()
        if not self.sync.running:
            self.sync.start()

    async def stop_following(self) -> None:
        """Stop replicating from the master this slave follows (it was replaced): no more
        acknowledgements to it while the new master's facts are not known yet."""
        async with self._lock:
            await self._stop_slave_services()

    async def _stop_slave_services(self) -> None:
        if self.state.ha_client is not None:
            await self.state.ha_client.stop()
        if self.sync.running:
            await self.sync.stop()

    def _save(self) -> None:
        st = self.state
        save_role(self.path, RoleRecord(st.store_config.broker_role.value, st.config.broker_id,
                                        self.epoch, self.epoch_start_offset, dict(self.history)))

    # ------------------------------------------------------------------ registration

    def registration_fields(self) -> dict[str, str]:
        return {EXT_EPOCH: str(self.epoch), EXT_EPOCHS: encode_epochs(self.history)}

    def on_registered(self, results: list[Registration]) -> None:
        """Learn epochs from the answers; demote on a fencing verdict, else confirm."""
        st = self.state
        oks = [r for r in results if r.ok]
        learned = False
        for r in oks:
            try:
                history = decode_epochs(r.ext.get(EXT_EPOCHS))
                epoch = int(r.ext.get(EXT_EPOCH, self.epoch))
            except ValueError as exc:
                log.warning("name server %s sent a bad epoch: %s", r.namesrv, exc)
                continue
            for e, offset in history.items():
                if self.history.get(e) != offset:
                    self.history[e] = offset
                    learned = True
            if st.is_slave and epoch > self.epoch:
                self.epoch, learned = epoch, True
        if learned and not self._lock.locked():
            self._save()
        if st.is_slave:
            return
        fenced = next((r for r in oks if r.ext.get(EXT_FENCED) == "true"), None)
        if fenced is not None:
            self._fenced(fenced)
        elif (st.store.writes_refused or "").startswith(AWAITING):
            if oks:
                st.store.writes_refused = None
                log.info("name server %s confirmed this broker as master of %s (epoch %d)",
                         oks[0].namesrv, st.config.broker_name, self.epoch)
            else:  # no name server answered: ask again soon, not a period later
                asyncio.get_running_loop().call_later(RETRY_UNCONFIRMED_S,
                                                      self.registration.request)

    def _fenced(self, r: Registration) -> None:
        st = self.state
        if self._lock.locked():
            return  # a role change is under way; its registration will tell again
        ext = r.ext
        epoch = int(ext.get(EXT_EPOCH, self.epoch))
        truncate = int(ext[EXT_TRUNCATE_OFFSET]) if EXT_TRUNCATE_OFFSET in ext else None
        slave_id = int(ext.get(EXT_BROKER_ID, "1"))
        st.store.writes_refused = (f"{FENCED}epoch {self.epoch} is behind epoch {epoch} of "
                                   f"{r.master_addr or 'another master'}")
        log.error("name server %s refused this broker as master of %s: epoch %d < %d of %s; "
                  "becoming slave %d%s", r.namesrv, st.config.broker_name, self.epoch, epoch,
                  r.master_addr, slave_id,
                  f", truncating the log to {truncate}" if truncate is not None else "")
        task = asyncio.get_running_loop().create_task(self._demote_fenced(
            r.master_addr, r.ha_server_addr, slave_id, epoch, truncate))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _demote_fenced(self, master: str | None, ha: str | None, slave_id: int,
                             epoch: int, truncate: int | None) -> None:
        try:
            await self.become_slave(master, ha, slave_id, epoch, truncate)
        except Exception:
            log.exception("demotion after fencing failed; writes stay refused")

    # ------------------------------------------------------------------ role changes

    def fence(self, reason: str) -> int:
        """Refuse every write from now on (the master keeps its role); returns the log end.

        Raises:
            RoleError: this broker is a slave.
        """
        st = self.state
        if st.is_slave:
            raise RoleError(f"{st.config.broker_addr} is a slave; only a master can be fenced")
        st.store.writes_refused = FENCED + reason
        log.warning("writes fenced: %s", reason)
        return st.store.get_max_phy_offset()

    def unfence(self) -> None:
        st = self.state
        if (st.store.writes_refused or "").startswith(FENCED):
            st.store.writes_refused = None
            log.warning("writes accepted again")

    async def become_master(self, epoch: int, role: BrokerRole) -> int:
        """Promote this broker; returns the offset where its epoch starts.

        Raises:
            RoleError: `epoch` is not above this broker's epoch, or `role` is SLAVE.
        """
        st = self.state
        if role is BrokerRole.SLAVE:
            raise RoleError("a master's role must be ASYNC_MASTER or SYNC_MASTER")
        async with self._lock:
            if epoch <= self.epoch:
                raise RoleError(f"epoch {epoch} is not above this broker's epoch {self.epoch}"
                                "; read the current epochs with `mqadmin haStatus`")
            await self._last_sync()
            await self._stop_slave_services()
            st.store.change_role(role)
            self._warn_unconfigured_topics()
            start = st.store.get_max_phy_offset()
            self.epoch, self.epoch_start_offset = epoch, start
            self.history[epoch] = start
            st.config = dataclasses.replace(st.config, broker_id=0)
            st.master_addr = st.ha_master_addr = None
            if st.ha is not None:
                st.ha.push2slave_max_offset = 0
                st.ha.reset_samples()
            self._save()
            st.store.writes_refused = None
            log.warning("promoted to %s of %s, epoch %d from offset %d", role.value,
                        st.config.broker_name, epoch, start)
        await self.registration.register_all()
        return start

    async def _last_sync(self) -> None:
        """A last metadata sync from the old master when it still answers (a switchover):
        topics, groups and offsets made or deleted since the last round are not lost."""
        st = self.state
        master = st.master_addr
        if not st.is_slave or not master or master == st.config.broker_addr:
            return
        try:
            async with asyncio.timeout(LAST_SYNC_S):
                await self.sync.sync_all(master, once=True)
        except TimeoutError:
            log.warning("no last metadata sync from %s before the promotion: it did not "
                        "answer within %g s", master, LAST_SYNC_S)

    def _warn_unconfigured_topics(self) -> None:
        """Topics with queues in the store but no config (created on the old master after
        the last metadata sync, or deleted there) stay unconfigured: a promotion invents no
        topic.  Their messages stay in the store; creating the topic again serves them."""
        st = self.state
        orphans = sorted(t for t, queue_ids in st.store.topic_queues().items()
                         if queue_ids and st.topics.get(t) is None and t not in KEEP_QUEUES_OF)
        if orphans:
            log.warning("promoted with consume queues but no config for %s: not served (the "
                        "master did not have them at the last metadata sync); create them "
                        "with updateTopic to serve their messages", ", ".join(orphans))

    async def become_slave(self, master_addr: str | None, master_ha_addr: str | None,
                           broker_id: int, epoch: int, truncate_to: int | None = None) -> None:
        """Demote (or re-point) this broker to a slave of `master_addr`.

        Raises:
            RoleError: `broker_id` is not > 0, or `epoch` is behind this broker's.
        """
        st = self.state
        if broker_id <= 0:
            raise RoleError(f"a slave's brokerId must be > 0, not {broker_id}")
        if epoch < self.epoch:
            raise RoleError(f"epoch {epoch} is behind this broker's epoch {self.epoch}")
        if not st.is_slave:
            st.store.writes_refused = f"{FENCED}becoming a slave of {master_addr}"
        async with self._lock:
            await self._stop_slave_services()
            if st.ha is not None:
                st.ha.close_all("this broker is becoming a slave")
            st.store.change_role(BrokerRole.SLAVE)
            end = st.store.get_max_phy_offset()
            if truncate_to is not None and truncate_to < end:
                log.warning("dropping commit-log bytes %d..%d written after the new master's "
                            "epoch began", truncate_to, end)
                st.store.truncate_to(truncate_to)
            if st.ha is not None:
                st.ha.reset_samples()
            self.epoch = epoch
            self.epoch_start_offset = self.history.get(epoch, self.epoch_start_offset)
            st.config = dataclasses.replace(st.config, broker_id=broker_id)
            st.master_addr, st.ha_master_addr = master_addr, master_ha_addr
            self._save()
            st.store.writes_refused = None  # the SLAVE role refuses writes by itself
            self._start_slave_services()
            log.warning("now slave %d of %s (master %s, epoch %d)", broker_id,
                        st.config.broker_name, master_addr, epoch)
        await self.registration.register_all()

    # ------------------------------------------------------------------ status

    def runtime_info(self) -> HARuntimeInfo:
        st = self.state
        store = st.store
        master = not st.is_slave
        conns = st.ha.connection_infos() if st.ha is not None and master else []
        client = (st.ha_client.runtime_info() if st.ha_client is not None and not master
                  else HAClientRuntimeInfo())
        return HARuntimeInfo(
            master=master,
            master_commit_log_max_offset=store.get_max_phy_offset() if master else 0,
            in_sync_slave_nums=sum(c.in_sync for c in conns),
            ha_connection_info=conns,
            ha_client_runtime_info=client,
            broker_name=st.config.broker_name,
            broker_addr=st.config.broker_addr,
            ha_server_addr=st.ha_server_addr,
            broker_role=st.store_config.broker_role.value,
            broker_id=st.config.broker_id,
            epoch=self.epoch,
            epoch_start_offset=self.epoch_start_offset,
            commit_log_min_offset=store.get_min_phy_offset(),
            commit_log_max_offset=store.get_max_phy_offset(),
            average_record_size=average_record_size(store),
            writes_refused=store.writes_refused or store.in_sync_replicas_short,
        )
