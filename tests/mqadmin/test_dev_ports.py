"""`dev up`'s port choice: no two servers share a port, neighbours (fast, HA) included."""

from __future__ import annotations

import json
from pathlib import Path

from mqadmin.dev.processes import BROKER_NEIGHBOURS, choose_ports, free_port


def footprint(name: str, port: int) -> set[int]:
    return {port + d for d in (0, *(() if name == "namesrv" else BROKER_NEIGHBOURS))}


def test_a_last_run_port_overlapping_another_broker_is_not_reused(tmp_path: Path) -> None:
    first = free_port(neighbours=(-2, 1, 2, 3))
    saved = tmp_path / "ports.json"  # broker-a-n2's fast port would be broker-a-n1's port
    saved.write_text(json.dumps({"namesrv": free_port(), "broker-a-n1": first,
                                 "broker-a-n2": first + 2}))
    ports = choose_ports(saved, {"namesrv": 0, "broker-a-n1": 0, "broker-a-n2": 0})
    assert ports["broker-a-n1"] == first
    used = [footprint(name, port) for name, port in ports.items()]
    assert sum(len(u) for u in used) == len(set().union(*used))
    assert json.loads(saved.read_text()) == ports
