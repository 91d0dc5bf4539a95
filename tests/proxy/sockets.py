"""Which process holds which TCP connection, from /proc (Linux): which proxy worker serves a
client's connection."""

from __future__ import annotations

import os
from pathlib import Path


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid:
            found.append(int(entry.name))
    return found


def _inodes(pid: int) -> set[int]:
    out = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _tcp() -> list[tuple[int, int, int]]:
    """(local port, remote port, inode) of every established TCP socket (gRPC's client
    connects over IPv6 sockets, IPv4 addresses mapped)."""
    rows = []
    lines = [line for name in ("tcp", "tcp6")
             for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]]
    for line in lines:
        parts = line.split()
        if parts[3] != "01":  # ESTABLISHED
            continue
        rows.append((int(parts[1].split(":")[1], 16), int(parts[2].split(":")[1], 16),
                     int(parts[9])))
    return rows


def client_ports(pid: int, server_port: int) -> set[int]:
    """Local ports of `pid`'s connections to `server_port`."""
    mine = _inodes(pid)
    return {local for local, remote, inode in _tcp() if remote == server_port and inode in mine}


def served_ports(pid: int, server_port: int) -> set[int]:
    """Client ports of the connections to `server_port` that `pid` or its children hold."""
    inodes = set().union(*(_inodes(p) for p in [pid, *_children(pid)]))
    return {remote for local, remote, inode in _tcp()
            if local == server_port and inode in inodes}
