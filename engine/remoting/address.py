"""Broker and name-server addresses: ``"ip:port"`` strings as RocketMQ writes them, and the
address this host is reached by."""

from __future__ import annotations

import socket


def local_ip() -> str:
    """The address other hosts reach this one by: the IPv4 address of the default route (what
    `RemotingUtil.getLocalAddress` picks), else loopback.

    Brokers take it as `brokerIP1` and clients as their client IP (client ids, message ids).
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; this only selects a route
            ip: str = s.getsockname()[0]
            return ip
    except OSError:
        return "127.0.0.1"


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (IPv6 hosts bare or in brackets) into host and port.

    Raises:
        ValueError: no port, or a port that is not a number in 0..65535.
    """
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {addr!r} is not of the form host:port")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {addr!r} has a non-numeric port") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {addr!r} has a port outside 0..65535")
    return host.strip("[]"), port


def format_addr(host: str, port: int) -> str:
    return f"{host}:{port}"


def parse_addr_list(text: str) -> list[str]:
    """A ``;``-separated name-server list (NAMESRV_ADDR, namesrvAddr), validated."""
    addrs = [part.strip() for part in text.split(";") if part.strip()]
    for addr in addrs:
        parse_addr(addr)
    return addrs
