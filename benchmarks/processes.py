"""Server processes for benchmarks: free ports, waiting for a listener, an `mqbroker` process,
and the CPU time a server process has used (to report CPU per operation beside throughput)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: pid of the server process listening at each address `broker_process` yielded.
_PIDS: dict[str, int] = {}


def server_pid(addr: str) -> int:
    """The pid of the `broker_process` serving `addr`."""
    return _PIDS[addr]


def _stat_cpu(path: str) -> float | None:
    """User + system CPU seconds in a /proc stat file; None when it cannot be read."""
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid` (all its threads); NaN where
    /proc is not available."""
    found = _stat_cpu(f"/proc/{pid}/stat")
    return float("nan") if found is None else found


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU seconds used so far by each thread of process `pid` (empty where
    /proc is not available)."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        found = _stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        if found is not None:  # else the thread ended
            out[int(tid)] = found
    return out


def children(pid: int, module: str) -> list[int]:
    """`pid`'s child processes running ``python -m module``."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for child in f.read().split():
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    if module.encode() in cmdline.read().split(b"\0"):
                        found.append(int(child))
    return found


def free_port() -> int:
    """A port with its neighbours (fast port -2, HA port +1) free too."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        ok = True
        for p in (port - 2, port + 1):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok and port > 1024:
            return port
    raise SystemExit("no free port triple found")


@contextlib.contextmanager
def namesrv_in_thread(tmp: str) -> Iterator[str]:
    """A name server on port 0 with its files under `tmp`, on an event loop of its own in a
    daemon thread (the benchmark's own calls keep this thread); yields its address."""
    from engine.namesrv.config import NamesrvConfig
    from engine.namesrv.controller import NamesrvController

    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=f"{tmp}/kv.json",
                                              config_store_path=f"{tmp}/ns.properties"))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(namesrv.start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{namesrv.port}"
    finally:
        asyncio.run_coroutine_threadsafe(namesrv.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)


@contextlib.contextmanager
def broker_process(**settings: str) -> Iterator[str]:
    """Yields the broker address while an mqbroker process runs."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp, "broker.conf")
        lines = {"brokerName": "bench-broker", "brokerIP1": "127.0.0.1",
                 "bindAddress": "127.0.0.1", "listenPort": str(port),
                 "storePathRootDir": f"{tmp}/store", "logsDir": f"{tmp}/logs",
                 "flushDiskType": "ASYNC_FLUSH", **settings}
        conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        proc = subprocess.Popen([sys.executable, "-m", "engine.broker.main", "-c", str(conf)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HOME": tmp, "NAMESRV_ADDR": ""})
        try:
            asyncio.run(wait_listening(port, proc))
            addr = f"127.0.0.1:{port}"
            _PIDS[addr] = proc.pid
            yield addr
        finally:
            _PIDS.pop(f"127.0.0.1:{port}", None)
            proc.terminate()
            proc.wait(60)


async def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"{proc.args!r} did not start listening within 60 s")
