"""Local mode: the proxy inside the broker process (`mqbroker --enable-proxy`).

How this works: the proxy takes the broker's name servers, cluster name, address and access
control: gRPC calls are checked against the broker's own users and rules (its `BrokerAccess`
store, reloaded as the broker reloads it), once, at the proxy.  It then reaches brokers over
remoting like any other (see brokers.py), except that its requests to its own broker do not
cross a socket: the gateway's (sends, acks, receives, topic and group configs) and each
client session's (heartbeats, the transaction checks sent back) go as `RemotingCommand`s to
the broker server's own dispatcher (`RemotingServer.connect_in_process`), with its rpc
metrics as for a request read from a socket.  Those connections are trusted: as in 5.3.3's
local mode, whose proxy calls its broker's processors directly, the broker's access guard
does not check them again (so neither `aclEnable` nor ACL 2.0 needs an inner credential for
the proxy).  A session's connection carries its client's address, so the broker lists each
gRPC client with an address of its own.  Requests to other brokers are sockets, signed with
the broker's innerClientAuthenticationCredentials when it has them.

With `proxyWorkers` (one per core by default) the proxy runs instead in worker processes the
broker supervises (`local_workers`, workers.py): they reach this broker over loopback
remoting like any other, signed with innerClientAuthenticationCredentials; without that
credential and with access control on, the proxy stays in this process.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

from engine.broker.access import BrokerAccess
from engine.broker.controller import BrokerController
from engine.proxy.auth import GrpcAuth
from engine.proxy.config import ProxyConfig
from engine.proxy.server import ProxyServer
from engine.proxy.sessions import LocalBroker
from engine.proxy.worker import AuthSpec, WorkerSpec
from engine.proxy.workers import ProxyWorkers, worker_count
from engine.remoting.address import parse_addr
from engine.remoting.client import InProcessConnector
from engine.remoting.connection import Connection, Dispatcher


def broker_auth(access: BrokerAccess) -> GrpcAuth:
    """gRPC checks against the broker's users and rules, on and off with the broker's own."""
    return GrpcAuth(access.store.tables, authentication=lambda: access.authentication,
                    authorization=lambda: access.authorization)


log = logging.getLogger("engine.proxy")


def local_workers(controller: BrokerController, config: ProxyConfig) -> ProxyWorkers | None:
    """The proxy for `controller`'s cluster as `proxyWorkers` processes (workers.py), or None
    when it runs in the broker's process: proxyWorkers=0, or access control on without
    innerClientAuthenticationCredentials (a worker reaches its broker over loopback remoting
    and signs with that credential, the broker's SUPER user, as 5.3.3's cluster-mode proxy
    signs with its own; without it only the in-process connection is trusted).

    Raises:
        ValueError: the broker has no name server address (routes come from them).
    """
    count = worker_count(config)
    if count <= 0:
        return None
    broker = controller.state.config
    if not broker.namesrv_addr:
        raise ValueError("--enable-proxy needs the broker's name servers (-n or namesrvAddr): "
                         "the proxy reads routes from them")
    access = controller.access
    credentials = access.inner_credentials()
    auth = None
    if access.enabled:
        if credentials is None:
            log.warning("proxyWorkers=%d: access control is on without "
                        "innerClientAuthenticationCredentials, which the workers sign with: "
                        "the proxy runs in the broker's process", count)
            return None
        auth = AuthSpec(os.path.dirname(access.store.users_path), access.store.rocketmq_home,
                        access.authentication, access.authorization)
    config = dataclasses.replace(config, proxy_mode="local",
                                 cluster_name=broker.broker_cluster_name)
    spec = WorkerSpec(config=config, namesrv_addr=broker.namesrv_addr,
                      host=broker.bind_address or "0.0.0.0", advertise_host=broker.broker_ip1,
                      auth=auth, credentials=credentials, tls=None,
                      grace=config.grpc_shutdown_time_seconds, logs_dir=broker.logs_dir,
                      index=0)
    return ProxyWorkers(spec, count)


def local_proxy(controller: BrokerController, config: ProxyConfig) -> ProxyServer:
    """A proxy for `controller`'s cluster; start it after the broker has started.

    Raises:
        ValueError: the broker has no name server address (routes come from them).
    """
    broker = controller.state.config
    if not broker.namesrv_addr:
        raise ValueError("--enable-proxy needs the broker's name servers (-n or namesrvAddr): "
                         "the proxy reads routes from them")
    config = dataclasses.replace(config, proxy_mode="local",
                                 cluster_name=broker.broker_cluster_name)
    proxy = ProxyServer(config, broker.namesrv_addr, host=broker.bind_address or "0.0.0.0",
                        advertise_host=broker.broker_ip1, auth=broker_auth(controller.access),
                        credentials=controller.access.inner_credentials())
    server = controller.server

    def connect(dispatcher: Dispatcher | None,
                on_close: Callable[[Connection], None]) -> Connection:
        return server.connect_in_process(client_dispatcher=dispatcher, client_on_close=on_close,
                                         trusted=True)

    def client_connector(peer: str) -> InProcessConnector:
        try:
            addr = parse_addr(peer)
        except ValueError:
            addr = ("127.0.0.1", 0)

        def connect_client(dispatcher: Dispatcher | None,
                           on_close: Callable[[Connection], None]) -> Connection:
            return server.connect_in_process(client_dispatcher=dispatcher,
                                             client_on_close=on_close, client_addr=addr,
                                             trusted=True)
        return connect_client

    proxy.gateway.remoting.reach_in_process(controller.addr, connect)
    proxy.core.sessions.local = LocalBroker(controller.addr, client_connector)
    return proxy
