"""`BrokerController`: wires a broker together and runs it.

Start order: open the store (recovery), load topics/groups/offsets, bind the listen port, the
fast port (listenPort - 2), the HA port (haListenPort, listenPort + 1) and, with
metricsExporterType=PROM, the /metrics port, then start the periodic services and the role's
replication services, and register with the name servers.
Stop: an UNREGISTER_BROKER to every name server, then the client connections are closed
(they may hold every file descriptor the files written next need), then the services, HA and
the store stop, with consumer offsets and configs written last.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.auth.errors import AuthError
from engine.broker.access import BrokerAccess
from engine.broker.config import BrokerConfig, MetricsExporterType
from engine.broker.controller_mode import ControllerModeService
from engine.broker.registration import NamesrvRegistration
from engine.broker.role import RoleManager
from engine.broker.router import build_router
from engine.broker.services import PeriodicService
from engine.broker.state import BrokerState, wall_clock_ms
from engine.broker.transaction_check import TransactionCheckService
from engine.ha.errors import RoleFileError
from engine.ha.master import HAService
from engine.remoting.connection import Connection
from engine.remoting.server import PortInUseError, RemotingServer
from engine.store.config import MessageStoreConfig
from engine.store.errors import ConfigFileError

if TYPE_CHECKING:
    from engine.broker.metrics.exporter import MetricsExporter

log = logging.getLogger("engine.broker")

CLIENT_SCAN_INTERVAL_S = 10.0
PORT_PAIR_TRIES = 50  # listenPort 0: listen ports tried until listenPort - 2 is free too


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class BrokerController:
    def __init__(self, config: BrokerConfig, store_config: MessageStoreConfig,
                 *, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.state = BrokerState(config, store_config, clock=clock)
        router = build_router()
        idle = float(config.server_channel_max_idle_time_seconds) or None
        self.server: RemotingServer[BrokerState] = RemotingServer(
            router, self.state, host=config.bind_address, port=config.listen_port,
            on_connection_closed=self._connection_closed, idle_timeout=idle)
        self.fast_server: RemotingServer[BrokerState] | None = None
        if config.listen_port > 2 or config.listen_port == 0:  # port 0: found at start
            fast_port = config.fast_port if config.listen_port else 0
            self.fast_server = RemotingServer(
                router, self.state, host=config.bind_address, port=fast_port,
                on_connection_closed=self._connection_closed, idle_timeout=idle)
        self.access = self.state.access = BrokerAccess(
            config, store_config.config_dir, self._servers)
        self.registration = NamesrvRegistration(
            lambda: self.state.config, self.state.topics, self.state.client,
            on_master=self._learn_master, ha_server_addr=lambda: self.state.ha_server_addr)
        self.state.topics.on_change = self.registration.request
        self.state.register_now = self.registration.register_all
        st = self.state
        st.ha = HAService(
            st.store, host=config.bind_address, port=config.ha_port,
            heartbeat_interval_ms=config.ha_send_heartbeat_interval,
            housekeeping_interval_ms=config.ha_housekeeping_interval,
            transfer_batch_size=config.ha_transfer_batch_size,
            fallbehind_max=config.ha_slave_fallbehind_max,
            accepting=lambda: not st.is_slave)
        self.roles = st.roles = RoleManager(st, self.registration)
        if config.enable_controller_mode:
            st.controller_mode = ControllerModeService(st, self.roles, store_config.broker_role,
                                                       clock=monotonic_ms)
        self.transaction_check = TransactionCheckService(st)
        self.services = [
            PeriodicService("flush-consumer-offsets",
                            st.config.flush_consumer_offset_interval / 1000, st.offsets.persist),
            PeriodicService("scan-client-channels", CLIENT_SCAN_INTERVAL_S,
                            self._expire_clients),
            PeriodicService("stats-sampler", 1.0, st.stats.sample),
            st.schedule,
            st.timer,
            self.transaction_check,
            PeriodicService("flush-consumer-order-info",
                            st.config.flush_consumer_offset_interval / 1000, st.pop.order.persist),
            st.pop.revive,
        ]
        #: /metrics (metricsExporterType=PROM); prometheus_client is imported only then.
        self.metrics: MetricsExporter | None = None
        if config.metrics_exporter_type is MetricsExporterType.PROM:
            from engine.broker.metrics.exporter import MetricsExporter
            self.metrics = MetricsExporter(st, config.metrics_host,
                                           config.metrics_prom_exporter_port)
            for server in self._servers():  # rocketmq_rpc_latency: timed only with metrics on
                server.set_dispatcher(self.metrics.timed_dispatcher(router))
        self._started = False

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def addr(self) -> str:
        return self.state.config.broker_addr

    def _connection_closed(self, conn: Connection) -> None:
        self.state.consumers.connection_closed(conn)
        self.state.producers.connection_closed(conn)

    def _expire_clients(self) -> None:
        timeout = self.state.config.channel_expired_timeout
        for channel in (self.state.consumers.expire(timeout)
                        + self.state.producers.expire(timeout)):
            log.warning("client %s (%s) sent no heartbeat for %d ms: closing",
                        channel.client_id, channel.conn.remote_addr, timeout)
            channel.conn.close()

    def _learn_master(self, master_addr: str | None, ha_addr: str | None) -> None:
        st = self.state
        if (master_addr, ha_addr) != (st.master_addr, st.ha_master_addr):
            log.info("master of %s is %s (HA %s)", st.config.broker_name, master_addr, ha_addr)
        st.master_addr, st.ha_master_addr = master_addr, ha_addr

    async def start(self) -> None:
        """Recover the store, load configs, listen, register.

        Raises:
            PortInUseError: the listen or fast port is taken.
            StoreError / ConfigFileError: the store or a config file cannot be opened.
        """
        st = self.state
        try:
            self.roles.load()  # the persisted role overrides brokerRole/brokerId of the config
        except RoleFileError as exc:
            raise ConfigFileError(str(exc)) from None
        self.roles.fence_until_confirmed()
        if st.controller_mode is not None:
            st.controller_mode.fence()
        st.store.load()
        st.topics.load()
        st.groups.load()
        st.offsets.load()
        st.pop.order.load()
        st.schedule.load()
        try:
            self.access.start()
            st.client.credentials = self.access.inner_credentials()
        except AuthError as exc:
            raise ConfigFileError(f"access control: {exc}") from None
        await self.server.start()
        assert st.ha is not None
        try:
            await self._start_fast_server()
            await self._start_ha(st.ha)
            if self.metrics is not None:
                await self.metrics.start()
        except BaseException:
            if self.fast_server is not None:
                await self.fast_server.stop()
            await self.server.stop()
            raise
        if self.server.port != st.config.listen_port:  # port 0: advertise the real port
            st.config = dataclasses.replace(st.config, listen_port=self.server.port)
        await st.store.start()
        st.pop.ensure_loaded()  # a master replays its revive queues before serving a POP
        for service in self.services:
            service.start()
        await self.roles.start()
        self._started = True
        if st.controller_mode is not None:
            await st.controller_mode.start()
        await self.registration.register_all()  # as 4.9.7: registered before start() returns
        self.registration.start()
        log.info("The broker[%s, %s] boot success. serializeType=JSON and name server is %s",
                 st.config.broker_name, st.config.broker_addr, st.config.namesrv_addr)

    def _servers(self) -> list[RemotingServer[BrokerState]]:
        return [s for s in (self.server, self.fast_server) if s is not None]

    async def _start_fast_server(self) -> None:
        """Bind the fast port, listenPort - 2.  With listenPort 0 (tests) the listen port is
        moved until the port two below it is free too: a slave syncs its topics from its
        master's port - 2, as Apache's do, and must reach that broker, never another process.
        """
        fast = self.fast_server
        if fast is None:
            return
        if self.state.config.listen_port:
            await fast.start()
            return
        for _ in range(PORT_PAIR_TRIES):
            if self.server.port > 2:
                fast.requested_port = self.server.port - 2
                try:
                    await fast.start()
                    return
                except PortInUseError:
                    pass
            await self.server.stop()
            await self.server.start()
        log.warning("no free port two below the listen port %d: no fast port", self.server.port)
        self.fast_server = None

    async def _start_ha(self, ha: HAService) -> None:
        """Bind the HA port; with listenPort 0 (tests), next to the real listen port if free."""
        cfg = self.state.config
        if cfg.ha_listen_port is not None or cfg.listen_port:
            await ha.start()
            return
        ha.requested_port = self.server.port + 1
        try:
            await ha.start()
        except OSError:
            ha.requested_port = 0
            await ha.start()

    async def stop(self) -> None:
        """Unregister, stop serving, persist offsets and configs, close the store."""
        st = self.state
        if self.metrics is not None:
            await self.metrics.stop()
        if not self._started:  # a failed start: release what was opened, write nothing
            if self.fast_server is not None:
                await self.fast_server.stop()
            await self.server.stop()
            if st.ha is not None:
                await st.ha.stop()
            await st.client.close()
            st.store.close()
            return
        if st.controller_mode is not None:
            await st.controller_mode.stop()
        await self.registration.stop(unregister=True)
        # Clients first: their connections may hold every file descriptor the process may
        # open (heavy traffic, peers stuck mid-frame), and the services below write files.
        if self.fast_server is not None:
            await self.fast_server.stop()
        st.pop.polling.wake_all()  # held POP / NOTIFICATION requests answer before the close
        await self.server.stop()
        await self.roles.stop()
        await self.access.stop()
        for service in self.services:
            await service.stop()
        if st.ha is not None:
            await st.ha.stop()
        for manager in (st.offsets, st.topics, st.groups, st.pop.order):
            await manager.wait_persisted()  # a background write shares the file's .tmp path
            manager.flush()
        await st.store.shutdown()
        await st.client.close()
        self._started = False
        log.info("broker %s stopped", st.config.broker_name)
