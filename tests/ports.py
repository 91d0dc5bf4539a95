"""Ports for servers that a test starts as processes and must name before they start (a
broker with its HA port beside it).

They are picked outside the OS's ephemeral range, which port-0 binds and outgoing connections
draw from, so no other test's socket takes one between the pick and the server's bind; each
pytest-xdist worker picks from its own slice, and no port is handed out twice in a process.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST, HIGHEST = 10_000, 65_535
SLICES = 8  # worker gwN picks from slice N % SLICES

_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default


def _slice() -> range:
    """This worker's ports: below the ephemeral range, or above it where there is more room."""
    low, high = _ephemeral_range()
    start, stop = (LOWEST, low) if low - LOWEST >= HIGHEST - high else (high + 1, HIGHEST)
    width = (stop - start) // SLICES
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name[2:]) % SLICES if name[2:].isdigit() else 0
    return range(start + index * width, start + (index + 1) * width)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(neighbours: tuple[int, ...] = (-2, 1)) -> int:
    """A free port with its `neighbours` (a broker's fast port -2, HA port +1) free too."""
    ports = _slice()
    for _ in range(500):
        port = random.randrange(ports.start + 2, ports.stop - 2)
        wanted = {port + d for d in (0, *neighbours)}
        if not wanted & _handed_out and all(_free(p) for p in wanted):
            _handed_out.update(wanted)
            return port
    raise RuntimeError(f"no free port with neighbours {neighbours} in {ports}")
