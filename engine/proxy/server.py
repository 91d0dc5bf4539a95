"""`ProxyServer`: MessagingService on the gRPC port (our HTTP/2 front or grpcio's server), its
gateway and its janitor.

Start: connect nothing yet (brokers and name servers are reached on first use), load the TLS key
pair unless tlsServerMode is disabled (tls.py), and serve grpcServerPort (0 picks a free port)
with the front `grpcFront` names.  Ours (h2/grpc_server.py) takes the listening socket itself
and serves TLS by the mode (permissive: by each connection's first byte).  grpcio's binds as
the mode says: disabled, its plaintext port; enforcing, its TLS port; permissive, a
`JoinProcess` (join_supervisor.py, join_process.py) that hands each connection to one of grpc's
two loopback ports, TLS or plaintext, by its first byte.  Then start the janitor Service, which
every few seconds unregisters clients idle for grpcClientIdleTimeMills and drops expired
transaction data. Stop: end every Telemetry stream (they would otherwise hold the grace period
to its end), stop accepting calls (grpcShutdownTimeSeconds of grace for those in flight), end
the join (closing the joined connections), unregister every client from the brokers, close the
connections.
"""

from __future__ import annotations

import logging
import socket

import grpc

from engine.broker.services import PeriodicService
from engine.protocol.signature import Credentials
from engine.proxy import handlers
from engine.proxy.auth import GrpcAuth
from engine.proxy.brokers import BrokerGateway
from engine.proxy.config import ProxyConfig, TlsMode
from engine.proxy.core import ProxyCore
from engine.proxy.h2.grpc_server import GrpcFront
from engine.proxy.join_process import FIRST_BYTE_TIMEOUT_S, LOOPBACK
from engine.proxy.join_supervisor import JoinProcess
from engine.proxy.service import MessagingService
from engine.proxy.tls import TlsMaterial, load_material
from engine.remoting.address import local_ip

log = logging.getLogger("engine.proxy")

JANITOR_INTERVAL_S = 5.0


def advertised_host(config: ProxyConfig, host: str, advertise_host: str | None) -> str:
    """The host clients are told: localServeAddr's, else `advertise_host`, else the listen
    host, else (listening on every address) this host's IP."""
    if config.local_serve_addr:
        return config.local_serve_addr.rpartition(":")[0] or config.local_serve_addr
    if advertise_host:
        return advertise_host
    return host if host not in ("0.0.0.0", "::", "") else local_ip()


class ProxyPortInUseError(OSError):
    """grpcServerPort is taken (or cannot be bound)."""


class ProxyServer:
    def __init__(self, config: ProxyConfig, namesrv_addr: str, *, host: str = "0.0.0.0",
                 advertise_host: str | None = None, auth: GrpcAuth | None = None,
                 credentials: Credentials | None = None, listener: socket.socket | None = None,
                 reuse_port: bool = False, tls: TlsMaterial | None = None) -> None:
        self.config = config
        #: A worker's (workers.py): the permissive mode's listening socket, handed over bound.
        self.listener = listener
        #: A worker's in the other modes: grpc binds grpcServerPort with SO_REUSEPORT.
        self.reuse_port = reuse_port
        self.host = host
        self.advertise_host = advertise_host
        self.gateway = BrokerGateway(config, namesrv_addr, credentials=credentials)
        self.core = ProxyCore(config, self.gateway, auth)
        self.server: grpc.aio.Server | None = None
        #: Our own HTTP/2 front (grpcFront "h2"), instead of grpcio's server.
        self.front: GrpcFront | None = None
        self.port = 0
        #: The permissive mode's port (None in the other modes).
        self.join: JoinProcess | None = None
        #: What TLS is served with (None when tlsServerMode is disabled; a worker's is handed
        #: over, so every worker serves the same certificate).
        self.tls: TlsMaterial | None = tls
        #: Seconds a joined connection may stay silent before its first byte.
        self.first_byte_timeout = FIRST_BYTE_TIMEOUT_S
        interval = min(JANITOR_INTERVAL_S, config.grpc_client_idle_time_mills / 2000)
        self.janitor = PeriodicService("proxy-janitor", interval, self._clean)

    @property
    def endpoint(self) -> str:
        """``host:port`` clients are given (and should be configured with)."""
        return self.core.advertised

    def _advertised_host(self) -> str:
        return advertised_host(self.config, self.host, self.advertise_host)

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            ConfigError: tlsServerMode is not a mode.
            ProxyTlsError: TLS is on and its key pair cannot be read or made.
            ProxyPortInUseError: the port cannot be bound.
        """
        mode = self.config.tls_mode
        host = self._advertised_host()
        if mode is not TlsMode.DISABLED and self.tls is None:
            self.tls = await load_material(self.config, (host, self.host))
        if self.config.grpc_front == "h2":
            await self._start_front(mode, host)
            return
        size = self.config.grpc_max_inbound_message_size
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", size),
            ("grpc.so_reuseport", 1 if self.reuse_port else 0),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            # gRPC core then gathers the answers of many calls into fewer socket writes:
            # about 15% less CPU per call here (docs/proxy.md, Speed).
            ("grpc.optimization_target", "throughput"),
        ])
        handlers.add_to_server(MessagingService(self.core), server)
        where = f"{self.host}:{self.config.grpc_server_port}"
        join: JoinProcess | None = None
        if mode is TlsMode.PERMISSIVE:
            assert self.tls is not None
            plaintext = self._bind(server, f"{LOOPBACK}:0", None)
            secure = self._bind(server, f"{LOOPBACK}:0", self.tls)
            try:
                join = JoinProcess(self.host, self.config.grpc_server_port,
                                   plaintext_port=plaintext, tls_port=secure,
                                   first_byte_timeout=self.first_byte_timeout,
                                   listener=self.listener)
            except OSError as exc:
                raise ProxyPortInUseError(f"cannot bind the gRPC port {where}: "
                                          f"{exc.strerror or exc}") from None
            port = join.port
        else:
            port = self._bind(server, where, self.tls)
        try:
            await server.start()
        except BaseException:
            if join is not None:
                join.listener.close()
            raise
        self.server, self.port = server, port
        if join is not None:  # grpc's ports listen: the join may hand them connections
            self.join = join
            self.core.resolve_peer = join.client_peer
            await join.start()
        self._serving(mode, host, port)

    async def _start_front(self, mode: TlsMode, host: str) -> None:
        """Serve through our own HTTP/2 (h2/): one listening socket, TLS by the mode."""
        where = f"{self.host}:{self.config.grpc_server_port}"
        listener = self.listener
        if listener is None:
            try:
                listener = socket.create_server(
                    (self.host, self.config.grpc_server_port), backlog=1024,
                    family=socket.AF_INET6 if ":" in self.host else socket.AF_INET,
                    reuse_port=self.reuse_port)
            except OSError as exc:
                raise ProxyPortInUseError(f"cannot bind the gRPC port {where}: "
                                          f"{exc.strerror or exc}") from None
        front = GrpcFront(handlers.methods(MessagingService(self.core)),
                          max_message_size=self.config.grpc_max_inbound_message_size)
        front.first_byte_timeout = self.first_byte_timeout
        try:
            await front.serve(listener, None if self.tls is None else self.tls.ssl_context(),
                              permissive=mode is TlsMode.PERMISSIVE,
                              shared=self.listener is not None)
        except BaseException:
            listener.close()
            raise
        self.front, self.port = front, listener.getsockname()[1]
        self._serving(mode, host, self.port)

    def _serving(self, mode: TlsMode, host: str, port: int) -> None:
        """The port is served: what clients are told, the janitor, the log line."""
        self.core.advertised = self.config.local_serve_addr or f"{host}:{port}"
        self.janitor.start()
        log.info("gRPC proxy serving on %s (cluster %s, %s mode, TLS %s%s, front %s)",
                 self.core.advertised, self.config.cluster_name,
                 "local" if self.config.local_mode else "cluster", mode.value,
                 f", {self.tls.source}" if self.tls is not None else "", self.config.grpc_front)

    @staticmethod
    def _bind(server: grpc.aio.Server, where: str, tls: TlsMaterial | None) -> int:
        try:
            if tls is None:
                port: int = server.add_insecure_port(where)
            else:
                port = server.add_secure_port(where, tls.server_credentials())
        except RuntimeError as exc:
            raise ProxyPortInUseError(f"cannot bind the gRPC port {where}: {exc}") from None
        if port == 0:
            raise ProxyPortInUseError(f"cannot bind the gRPC port {where}")
        return port

    async def _clean(self) -> None:
        for session in self.core.sessions.idle():
            log.info("client %s idle for %d ms: unregistered", session.client_id,
                     self.config.grpc_client_idle_time_mills)
            await session.unregister()
        self.core.transactions.expire()

    async def stop(self, grace: float | None = None) -> None:
        """End the Telemetry streams, stop serving (`grace` seconds, default
        grpcShutdownTimeSeconds, for calls in flight), unregister every client."""
        if self.janitor.running:
            await self.janitor.stop()
        for session in self.core.sessions.all():
            if session.outbox is not None:
                session.outbox.put_nowait(None)  # the stream's writer returns: the call ends
        grace = self.config.grpc_shutdown_time_seconds if grace is None else grace
        if self.server is not None:
            await self.server.stop(grace)
            self.server = None
        if self.front is not None:
            await self.front.stop(grace)
            self.front = None
        if self.join is not None:
            await self.join.stop()
            self.join = None
        for session in self.core.sessions.all():
            self.core.sessions.remove(session.client_id)
            await session.unregister()
        await self.gateway.close()
