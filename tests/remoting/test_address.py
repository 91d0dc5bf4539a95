"""`local_ip`: the one address brokers and clients announce by default."""

from __future__ import annotations

import ipaddress
import socket

from engine.broker.config import BrokerConfig
from engine.client.core.client_config import ClientConfig
from engine.remoting.address import local_ip


def test_local_ip_is_an_address_of_this_host_that_brokers_and_clients_announce() -> None:
    ip = local_ip()
    ipaddress.IPv4Address(ip)
    with socket.socket() as s:
        s.bind((ip, 0))  # only an address of this host can be bound
    assert BrokerConfig().broker_ip1 == ip
    assert ClientConfig().client_ip == ip

