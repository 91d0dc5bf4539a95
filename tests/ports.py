"""Ports for servers that a test starts as processes and must name before they start (a
broker with its HA port beside it).

They are picked outside the OS's ephemeral range, which port-0 binds and outgoing connections
draw from, so no other test's socket takes one between the pick and the server's bind; each
pytest-xdist worker picks from its own slice, and no port is handed out twice in a process.
"""

from __future__ import annotations

import os

from mqadmin.dev.processes import free_port as free_unassigned_port
from mqadmin.dev.processes import unassigned_ports

SLICES = 8  # worker gwN picks from slice N % SLICES

_handed_out: set[int] = set()


def _slice() -> range:
    """This worker's ports: its share of the ports outside the ephemeral range."""
    ports = unassigned_ports()
    width = len(ports) // SLICES
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name[2:]) % SLICES if name[2:].isdigit() else 0
    return range(ports.start + index * width, ports.start + (index + 1) * width)


def free_port(neighbours: tuple[int, ...] = (-2, 1)) -> int:
    """A free port with its `neighbours` (a broker's fast port -2, HA port +1) free too,
    never one handed out before in this process."""
    for _ in range(100):
        port = free_unassigned_port(neighbours=neighbours, ports=_slice())
        wanted = {port + d for d in (0, *neighbours)}
        if not wanted & _handed_out:
            _handed_out.update(wanted)
            return port
    raise RuntimeError(f"no free port with neighbours {neighbours} in {_slice()}")
