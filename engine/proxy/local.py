"""Local mode: the proxy inside the broker process (`mqbroker --enable-proxy`).

How this works: the proxy takes the broker's name servers, cluster name, address and access
control: gRPC calls are checked against the broker's own users and rules (its `BrokerAccess`
store, reloaded as the broker reloads it), and the proxy's remoting requests are signed with
the broker's innerClientAuthenticationCredentials (a SUPER user the broker creates).  It
then reaches brokers over remoting like any other (see brokers.py), except that the gateway's
requests to its own broker (sends, acks, receives, topic and group configs) do not cross a
socket: they go as `RemotingCommand`s to the broker server's own dispatcher
(`RemotingServer.connect_in_process`), with the broker's access guard and rpc metrics as for a
request read from a socket, and only the transport differs.  The per-client connections of
`sessions.py` (heartbeats, the transaction checks sent back) stay sockets: the broker lists
each gRPC client as a connection with an address of its own.
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
from engine.proxy.worker import AuthSpec, WorkerSpec
from engine.proxy.workers import ProxyWorkers, worker_count
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
        return server.connect_in_process(client_dispatcher=dispatcher, client_on_close=on_close)

    proxy.gateway.remoting.reach_in_process(controller.addr, connect)
    return proxy
