"""Local mode: the proxy inside the broker process (`mqbroker --enable-proxy`).

How this works: the proxy takes the broker's name servers, cluster name, address and access
control: gRPC calls are checked against the broker's own users and rules (its `BrokerAccess`
store, reloaded as the broker reloads it), and the proxy's remoting requests are signed with
the broker's innerClientAuthenticationCredentials (a SUPER user the broker creates).  It
then reaches the broker over remoting like any other (see brokers.py).
"""

from __future__ import annotations

import dataclasses

from engine.broker.access import BrokerAccess
from engine.broker.controller import BrokerController
from engine.proxy.auth import GrpcAuth
from engine.proxy.config import ProxyConfig
from engine.proxy.server import ProxyServer


def broker_auth(access: BrokerAccess) -> GrpcAuth:
    """gRPC checks against the broker's users and rules, on and off with the broker's own."""
    return GrpcAuth(access.store.tables, authentication=lambda: access.authentication,
                    authorization=lambda: access.authorization)


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
    return ProxyServer(config, broker.namesrv_addr, host=broker.bind_address or "0.0.0.0",
                       advertise_host=broker.broker_ip1, auth=broker_auth(controller.access),
                       credentials=controller.access.inner_credentials())
