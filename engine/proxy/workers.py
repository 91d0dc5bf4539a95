"""`ProxyWorkers`: the gRPC proxy as N worker processes on one port, started and supervised.

How this works: one grpc.aio proxy is bound by its event loop's thread (grpc.aio's Python
layer, the proxy and, in local mode, the broker under one GIL), so the proxy runs as
`proxyWorkers` processes of its own (worker.py), each a whole `ProxyServer` reaching the
brokers over remoting.  The supervisor binds grpcServerPort itself, so a port in use fails
the start here with the usual error, and keeps it for as long as it runs:

* permissive TLS mode (the default): it binds and listens, and every worker inherits the
  one listening socket; each worker's join process (join_process.py) waits in accept() on
  that queue, and the kernel wakes one waiter per new connection (a busy join leaves the
  next one to the others: connections that arrive one at a time go to the workers in turn,
  a burst can land unevenly), and
  a worker that dies leaves the queue (and the port) to the others, and to itself once
  started again, with nothing lost but the connections it held.
* disabled and enforcing modes: grpc binds the port in each worker with SO_REUSEPORT (the
  kernel spreads connections over the workers' listeners by a hash of the addresses).  The
  supervisor first binds it without SO_REUSEPORT (a port any other socket holds is refused),
  then keeps a bound socket with SO_REUSEPORT that never listens, so no other user's process
  can take the port between restarts; connections queued at a worker that dies are lost.

A 5.x client keeps one HTTP/2 connection per endpoint, so all its calls (its Telemetry
stream, heartbeats, sends) reach one worker, which owns its session and its connections to
the brokers (so the broker's requests to that client reach the worker holding its stream);
receipts carry all an ack needs, so any worker acks them.  The supervisor loads the TLS key
pair once (every worker serves the same certificate) and hands each worker its `WorkerSpec`
on its stdin.  A worker that ends unasked is started again at once (after RESTART_DELAY_S
when it fails to start).  Stop closes every worker's stdin: each ends its Telemetry streams,
drains its calls for the grace given, unregisters its clients and exits (killed after
grace + STOP_TIMEOUT_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import sys
from pathlib import Path

from engine.proxy.config import ProxyConfig, TlsMode
from engine.proxy.server import ProxyPortInUseError, advertised_host
from engine.proxy.tls import load_material
from engine.proxy.worker import WorkerSpec

log = logging.getLogger("engine.proxy")

#: Seconds a worker may take to start, and beyond its grace to stop.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
#: Seconds between attempts to start a worker that failed to start again.
RESTART_DELAY_S = 1.0
_ROOT = str(Path(__file__).resolve().parents[2])


def worker_count(config: ProxyConfig) -> int:
    """`proxyWorkers`, a negative value meaning one per core."""
    if config.proxy_workers < 0:
        return os.cpu_count() or 1
    return config.proxy_workers


class _Worker:
    """One worker process and its slot (index); started again when it ends unasked."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: asyncio.subprocess.Process | None = None
        self.watch: asyncio.Task[None] | None = None


class ProxyWorkers:
    """The proxy of `spec` served by `count` worker processes on grpcServerPort."""

    def __init__(self, spec: WorkerSpec, count: int) -> None:
        self.spec = spec
        self.config = spec.config
        self.count = max(1, count)
        self.workers = [_Worker(i) for i in range(self.count)]
        self.port = 0
        self.endpoint = ""
        #: How many times a worker that ended unasked was started again.
        self.restarts = 0
        self._listener: socket.socket | None = None  # permissive: every worker's queue
        self._reserved: socket.socket | None = None  # other modes: holds the port
        self._stopping = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the running workers, by slot."""
        return [w.process.pid for w in self.workers if w.process is not None]

    def _bind(self) -> int:
        host, port = self.spec.host, self.config.grpc_server_port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        where = f"{host}:{port}"
        try:
            if self.config.tls_mode is TlsMode.PERMISSIVE:
                self._listener = socket.create_server((host, port), family=family,
                                                      backlog=1024)
                return int(self._listener.getsockname()[1])
            with socket.socket(family, socket.SOCK_STREAM) as probe:  # nobody holds it
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc binds
                probe.bind((host, port))
                port = probe.getsockname()[1]
            reserved = socket.socket(family, socket.SOCK_STREAM)
            reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            try:
                reserved.bind((host, port))
            except OSError:
                reserved.close()
                raise
            self._reserved = reserved
            return int(port)
        except OSError as exc:
            raise ProxyPortInUseError(f"cannot bind the gRPC port {where}: "
                                      f"{exc.strerror or exc}") from None

    async def start(self) -> None:
        """Bind the port and start every worker; returns once each serves.

        Raises:
            ConfigError: tlsServerMode is not a mode.
            ProxyTlsError: TLS is on and its key pair cannot be read or made.
            ProxyPortInUseError: the port cannot be bound.
            OSError: a worker did not start.
        """
        spec = self.spec
        tls = None
        if self.config.tls_mode is not TlsMode.DISABLED:
            host = advertised_host(self.config, spec.host, spec.advertise_host)
            tls = await load_material(self.config, (host, spec.host))
        self.port = self._bind()
        config = dataclasses.replace(self.config, grpc_server_port=self.port)
        self.spec = dataclasses.replace(spec, config=config, tls=tls)
        try:
            await asyncio.gather(*(self._spawn(w) for w in self.workers))
        except BaseException:
            await self.stop(grace=0)
            raise
        for worker in self.workers:
            worker.watch = asyncio.get_running_loop().create_task(self._watch(worker))
        log.info("gRPC proxy serving on %s with %d worker processes (pids %s)",
                 self.endpoint, self.count, self.pids)

    async def _spawn(self, worker: _Worker) -> None:
        """Start `worker`'s process and wait for its ``ready``.

        Raises:
            OSError: it did not start (it is ended).
        """
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        args = [sys.executable, "-m", "engine.proxy.worker"]
        fds: tuple[int, ...] = ()
        if self._listener is not None:
            fds = (self._listener.fileno(),)
            args += ["--listen-fd", str(fds[0])]
        process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            pass_fds=fds, env=env)
        worker.process = process
        assert process.stdin is not None and process.stdout is not None
        spec = dataclasses.replace(self.spec, index=worker.index)
        process.stdin.write(spec.to_json().encode() + b"\n")
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)).decode()
        except TimeoutError:
            line = "error it did not answer in time"
        if not line.startswith("ready "):
            await self._end(worker, 0)
            reason = line.partition(" ")[2].strip() or "it ended"
            raise OSError(f"proxy worker {worker.index} did not start: {reason}")
        self.endpoint = line.split()[1]

    async def _watch(self, worker: _Worker) -> None:
        """Start `worker` again whenever its process ends unasked."""
        while not self._stopping:
            process = worker.process
            assert process is not None
            code = await process.wait()
            if self._stopping:
                return
            log.error("proxy worker %d (pid %d) ended (exit code %s): starting it again",
                      worker.index, process.pid, code)
            while not self._stopping:
                try:
                    await self._spawn(worker)
                except OSError as exc:
                    log.error("%s: retrying in %.0f s", exc, RESTART_DELAY_S)
                    await asyncio.sleep(RESTART_DELAY_S)
                    continue
                self.restarts += 1
                log.info("proxy worker %d runs again (pid %d)", worker.index,
                         worker.process.pid if worker.process else 0)
                break

    async def _end(self, worker: _Worker, grace: float) -> None:
        """Ask `worker` to stop (its stdin closed) and wait; killed after the grace."""
        process = worker.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.write(f"{grace}\n".encode())
                process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), grace + STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("proxy worker %d did not stop in %.0f s: killed", worker.index,
                        grace + STOP_TIMEOUT_S)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        worker.process = None

    async def stop(self, grace: float | None = None) -> None:
        """Stop every worker (each drains its calls for `grace` seconds, default
        grpcShutdownTimeSeconds) and release the port."""
        self._stopping = True
        seconds = float(self.config.grpc_shutdown_time_seconds if grace is None else grace)
        for worker in self.workers:
            if worker.watch is not None:
                worker.watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker.watch
                worker.watch = None
        await asyncio.gather(*(self._end(w, seconds) for w in self.workers))
        for sock in (self._listener, self._reserved):
            if sock is not None:
                sock.close()
        self._listener = self._reserved = None
