"""Detached server processes of the dev cluster: spawn, recognise, stop, free ports, logs."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mqadmin.exit_codes import CliError

POLL = 0.05
LOWEST_PORT = 10_000  # dev servers' ports are chosen above this
BROKER_NEIGHBOURS = (-2, 1)  # the fast port (listenPort - 2) and the HA port (+1)
#: Ports named NAME-metrics are /metrics endpoints: one port, no neighbours.
METRICS_SUFFIX = "-metrics"
GRPC_SUFFIX = "-grpc"  # a broker's gRPC proxy port (`--enable-proxy`)

#: Children started by this process, so they can be waited for (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class DevError(CliError):
    """The dev cluster could not start or stop; the message says where to look."""


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_ours(pid: int, data_dir: Path) -> bool:
    """Whether `pid` runs (not a zombie) and its command line names `data_dir`.  A child
    started by this process is trusted while it runs: just after a spawn its command line
    can still read empty (the exec has not set up its arguments yet)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            # killed, its main thread can be a zombie while the others still exit (a write
            # to finish): waitpid reaps it only then, but it runs no more
            return not _zombie(pid)
        del _CHILDREN[pid]
        return False
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no /proc (macOS): trust the pid
    try:
        if _zombie(pid):
            return False
        return str(data_dir) in (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _zombie(pid: int) -> bool:
    """Whether /proc shows `pid` as a zombie (False without /proc or once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def log_path(data_dir: Path, name: str) -> Path:
    return data_dir / "logs" / f"{name}.out"


def spawn(name: str, args: list[str], data_dir: Path,
          env: dict[str, str] | None = None) -> int:
    """Start ``python ARGS`` in its own session (it outlives this command), output
    appended to logs/NAME.out, `env` added to the environment; returns its pid."""
    path = log_path(data_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as out:
        child = subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, cwd=data_dir,
                                 env={**os.environ, **env} if env else None)
    _CHILDREN[child.pid] = child
    return child.pid


def stop(pid: int, data_dir: Path, timeout: float) -> str:
    """SIGTERM, then SIGKILL after `timeout` s: "stopped", "killed" or "not running"."""
    if not is_ours(pid, data_dir):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_ours(pid, data_dir) and time.monotonic() < deadline:
        time.sleep(POLL)
    result = "stopped"
    if is_ours(pid, data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while is_ours(pid, data_dir):
            time.sleep(POLL)
        result = "killed"
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()
    return result


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_range() -> tuple[int, int]:
    """The ports the OS hands to port-0 binds and outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default


def unassigned_ports() -> range:
    """The wider of the two stretches of ports outside the ephemeral range (above 10000)."""
    low, high = ephemeral_range()
    return range(LOWEST_PORT, low) if low - LOWEST_PORT >= 65_536 - high else range(high + 1,
                                                                                   65_536)


def free_port(*, neighbours: tuple[int, ...] = (), ports: range | None = None) -> int:
    """A port free now, with `neighbours` (offsets such as -2, +1) free too, picked outside
    the ephemeral range: no client socket can take it between this pick and the server's
    bind, as one could take a port a port-0 bind had just released."""
    ports = ports or unassigned_ports()
    for _ in range(500):
        port = random.randrange(ports.start + 2, ports.stop - 2)
        if all(port_free(port + d) for d in (0, *neighbours)):
            return port
    raise DevError("found no free port; pass the ports with --namesrv-port/--broker-port")


def choose_ports(path: Path, asked: dict[str, int],
                 renamed: dict[str, str] | None = None) -> dict[str, int]:
    """The port of each server: the one asked for, else last run's (saved in `path`) if
    still free (offset message ids hold the broker's address), else a free one; saved
    for the next run.  `renamed` maps old process names of the file to today's."""
    try:
        last = {(renamed or {}).get(k, k): int(v)
                for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        last = {}
    ports: dict[str, int] = {}
    taken: set[int] = set()  # every port of the servers chosen so far, neighbours included

    def fits(port: int, neighbours: tuple[int, ...]) -> bool:
        return all(port + d not in taken and port_free(port + d) for d in (0, *neighbours))

    for name, port in asked.items():
        neighbours = (() if name == "namesrv" or name.endswith((METRICS_SUFFIX, GRPC_SUFFIX))
                      else BROKER_NEIGHBOURS)
        if port:
            ports[name] = port
        elif (old := last.get(name)) and fits(old, neighbours):
            ports[name] = old
        else:
            port = free_port(neighbours=neighbours)
            while not fits(port, neighbours):
                port = free_port(neighbours=neighbours)
            ports[name] = port
        taken.update(ports[name] + d for d in (0, *neighbours))
    path.write_text(json.dumps(ports) + "\n")
    return ports


def accepting(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_ready(what: str, ready: Callable[[], bool], pids: dict[str, int], data_dir: Path,
               timeout: float) -> None:
    """Poll `ready` until it holds; fail naming the log of a process of `pids` that
    exited meanwhile, or after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not ready():
        for name, pid in pids.items():
            if not is_ours(pid, data_dir):
                raise DevError(f"{name} exited while starting; its output "
                               f"({log_path(data_dir, name)}):\n"
                               f"{tail(log_path(data_dir, name))}")
        if time.monotonic() > deadline:
            raise DevError(f"{what} not ready after {timeout:g} s; see the logs in "
                           f"{data_dir / 'logs'}")
        time.sleep(POLL)
