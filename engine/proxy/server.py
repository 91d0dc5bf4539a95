"""`ProxyServer`: the grpc.aio server of MessagingService, its gateway and its janitor.

Start: connect nothing yet (brokers and name servers are reached on first use), bind
grpcServerPort (0 picks a free port), start serving, then the janitor Service, which every
few seconds unregisters clients idle for grpcClientIdleTimeMills and drops expired
transaction data.  Stop: end every Telemetry stream (they would otherwise hold the grace
period to its end), stop accepting calls (grpcShutdownTimeSeconds of grace for those in
flight), unregister every client from the brokers, close the connections.
"""

from __future__ import annotations

import logging

import grpc

from engine.broker.services import PeriodicService
from engine.protocol.signature import Credentials
from engine.proxy.auth import GrpcAuth
from engine.proxy.brokers import BrokerGateway
from engine.proxy.config import ProxyConfig
from engine.proxy.core import ProxyCore
from engine.proxy.service import MessagingService
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.address import local_ip

log = logging.getLogger("engine.proxy")

JANITOR_INTERVAL_S = 5.0


class ProxyPortInUseError(OSError):
    """grpcServerPort is taken (or cannot be bound)."""


class ProxyServer:
    def __init__(self, config: ProxyConfig, namesrv_addr: str, *, host: str = "0.0.0.0",
                 advertise_host: str | None = None, auth: GrpcAuth | None = None,
                 credentials: Credentials | None = None) -> None:
        self.config = config
        self.host = host
        self.advertise_host = advertise_host
        self.gateway = BrokerGateway(config, namesrv_addr, credentials=credentials)
        self.core = ProxyCore(config, self.gateway, auth)
        self.server: grpc.aio.Server | None = None
        self.port = 0
        interval = min(JANITOR_INTERVAL_S, config.grpc_client_idle_time_mills / 2000)
        self.janitor = PeriodicService("proxy-janitor", interval, self._clean)

    @property
    def endpoint(self) -> str:
        """``host:port`` clients are given (and should be configured with)."""
        return self.core.advertised

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            ProxyPortInUseError: the port cannot be bound.
        """
        size = self.config.grpc_max_inbound_message_size
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", size),
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            # gRPC core then gathers the answers of many calls into fewer socket writes:
            # about 15% less CPU per call here (docs/proxy.md, Speed).
            ("grpc.optimization_target", "throughput"),
        ])
        service_pb2_grpc.add_MessagingServiceServicer_to_server(  # type: ignore[no-untyped-call]
            MessagingService(self.core), server)
        where = f"{self.host}:{self.config.grpc_server_port}"
        try:
            port = server.add_insecure_port(where)
        except RuntimeError as exc:
            raise ProxyPortInUseError(f"cannot bind the gRPC port {where}: {exc}") from None
        if port == 0:
            raise ProxyPortInUseError(f"cannot bind the gRPC port {where}")
        await server.start()
        self.server, self.port = server, port
        advertised = self.config.local_serve_addr
        if not advertised:
            host = self.advertise_host or (self.host if self.host not in ("0.0.0.0", "::", "")
                                           else local_ip())
            advertised = f"{host}:{port}"
        self.core.advertised = advertised
        self.janitor.start()
        log.info("gRPC proxy serving on %s (cluster %s, %s mode)", advertised,
                 self.config.cluster_name, "local" if self.config.local_mode else "cluster")

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
        if self.server is not None:
            await self.server.stop(self.config.grpc_shutdown_time_seconds if grace is None
                                   else grace)
            self.server = None
        for session in self.core.sessions.all():
            self.core.sessions.remove(session.client_id)
            await session.unregister()
        await self.gateway.close()
