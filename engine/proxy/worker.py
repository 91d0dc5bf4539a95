"""A proxy worker process (`python -m engine.proxy.worker`): one grpc.aio proxy of several.

How this works: workers.py starts N of these and writes each, on its stdin, one JSON line: a
`WorkerSpec` (the proxy's settings, the name servers, the addresses, the access-control
files and flags, the credential that signs its remoting requests, the TLS key pair to serve;
on a pipe, so the secrets are never on a command line, in the environment or on disk).  The
worker is then an ordinary `ProxyServer` reaching the brokers over remoting (its own broker
over loopback, as any other): in the permissive TLS mode on the listening socket it inherits
(``--listen-fd``, shared by every worker: each worker's join process accepts from the same
queue), in the other modes on grpcServerPort bound again with SO_REUSEPORT.  It writes
``ready HOST:PORT`` on stdout once it serves, and stops (draining its calls for the spec's
grace) when its stdin ends: the supervisor closing it, or dying.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import gc
import json
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

from engine.auth.store import AuthStore
from engine.broker.services import PeriodicService
from engine.common import process
from engine.protocol.signature import Credentials
from engine.proxy.auth import GrpcAuth
from engine.proxy.config import ProxyConfig
from engine.proxy.server import ProxyServer
from engine.proxy.tls import TlsMaterial
from engine.remoting import loop

log = logging.getLogger("engine.proxy")

#: Seconds between two looks at the users and rules files (the broker's own interval).
AUTH_RELOAD_INTERVAL_S = 5.0
#: Allocations between two collections of the youngest generation (Python's default: 700).
GC_THRESHOLD = 10_000


@dataclass(frozen=True, slots=True)
class AuthSpec:
    """Where the users and rules are kept, and whether each check is on."""

    config_dir: str
    rocketmq_home: str | None
    authentication: bool
    authorization: bool


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything a worker needs, as the supervisor hands it over."""

    config: ProxyConfig
    namesrv_addr: str
    host: str
    advertise_host: str | None
    auth: AuthSpec | None
    credentials: Credentials | None
    tls: TlsMaterial | None
    #: Seconds of grace for calls in flight when the worker is asked to stop.
    grace: float
    logs_dir: str | None
    index: int

    def to_json(self) -> str:
        tls = None if self.tls is None else {
            "key": base64.b64encode(self.tls.key).decode(),
            "certificate": base64.b64encode(self.tls.certificate).decode(),
            "source": self.tls.source}
        return json.dumps({
            "config": dataclasses.asdict(self.config), "namesrv_addr": self.namesrv_addr,
            "host": self.host, "advertise_host": self.advertise_host,
            "auth": None if self.auth is None else dataclasses.asdict(self.auth),
            "credentials": None if self.credentials is None else
            [self.credentials.access_key, self.credentials.secret_key],
            "tls": tls, "grace": self.grace, "logs_dir": self.logs_dir, "index": self.index})

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        raw: dict[str, Any] = json.loads(text)
        tls = raw["tls"]
        creds = raw["credentials"]
        return cls(
            config=ProxyConfig(**raw["config"]), namesrv_addr=raw["namesrv_addr"],
            host=raw["host"], advertise_host=raw["advertise_host"],
            auth=None if raw["auth"] is None else AuthSpec(**raw["auth"]),
            credentials=None if creds is None else Credentials(creds[0], creds[1]),
            tls=None if tls is None else TlsMaterial(base64.b64decode(tls["key"]),
                                                     base64.b64decode(tls["certificate"]),
                                                     tls["source"]),
            grace=float(raw["grace"]), logs_dir=raw["logs_dir"], index=int(raw["index"]))


def _auth(spec: AuthSpec | None) -> tuple[GrpcAuth | None, PeriodicService | None]:
    """The users and rules of the broker's files, reloaded every few seconds.

    Raises:
        AuthError: the files cannot be read.
    """
    if spec is None:
        return None, None
    store = AuthStore(spec.config_dir, rocketmq_home=spec.rocketmq_home)
    store.load()
    auth = GrpcAuth(store.tables, authentication=lambda: spec.authentication,
                    authorization=lambda: spec.authorization, refresh=store.reload)

    def reload() -> None:
        store.reload()

    return auth, PeriodicService("auth-reload", AUTH_RELOAD_INTERVAL_S, reload)


async def _stdin_closed() -> float | None:
    """Returns when stdin ends (read in a thread: stdin is a pipe the supervisor holds),
    with the grace the supervisor wrote before closing it, if any."""
    text = await asyncio.to_thread(sys.stdin.buffer.read)
    try:
        return float(text.decode().split()[0])
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


def _settle_heap() -> None:
    """Keep what start-up made (modules, generated classes, settings) out of every later
    collection, and collect less often: each call leaves many short-lived containers, few
    of them in cycles, and a full collection would otherwise walk the whole heap (py-spy:
    1 to 2% of a worker's CPU under h2load went to collections)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 10, 10)


async def run(spec: WorkerSpec, listen_fd: int | None) -> int:
    auth, reloader = _auth(spec.auth)
    listener = None if listen_fd is None else socket.socket(fileno=listen_fd)
    proxy = ProxyServer(spec.config, spec.namesrv_addr, host=spec.host,
                        advertise_host=spec.advertise_host, auth=auth,
                        credentials=spec.credentials, listener=listener,
                        reuse_port=listener is None, tls=spec.tls)
    try:
        await proxy.start()
    except (OSError, ValueError) as exc:
        await proxy.stop(grace=0)
        print(f"error {exc}", flush=True)
        return 1
    if reloader is not None:
        reloader.start()
    # SIGTERM/SIGINT are the supervisor's to handle (a terminal's ^C reaches the whole group):
    # the worker stops when its stdin ends.
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, lambda: None)
    _settle_heap()
    print(f"ready {proxy.endpoint}", flush=True)
    log.info("proxy worker %d (pid %d) serving", spec.index, os.getpid())
    grace = await _stdin_closed()
    if reloader is not None:
        await reloader.stop()
    await proxy.stop(grace=spec.grace if grace is None else grace)
    log.info("proxy worker %d stopped", spec.index)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engine.proxy.worker")
    parser.add_argument("--listen-fd", type=int, default=None)
    args = parser.parse_args(argv)
    spec = WorkerSpec.from_json(sys.stdin.buffer.readline().decode())
    if spec.logs_dir:
        with contextlib.suppress(OSError):
            process.setup_logging(spec.logs_dir, f"proxy-worker-{spec.index}.log")
    return loop.run(run(spec, args.listen_fd))


if __name__ == "__main__":
    sys.exit(main())
