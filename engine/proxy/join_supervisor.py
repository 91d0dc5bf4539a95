"""The permissive mode's join process (join_process.py) as the proxy sees it: start, peers, stop.

How this works: `JoinProcess` binds grpcServerPort itself (so a port in use fails the start
here, and port 0 is resolved here), starts ``python -m engine.proxy.join_process`` with the bound
socket as an inherited fd and waits for its ``ready``.  It keeps its own copy of the socket
(it never accepts on it): a process that dies unasked (killed, say) is started again on the
same socket, so the port keeps its queued connections and serves again within a moment; the
connections the dead process held are gone with it, and their clients reconnect.  The
process's stdout is read on the event loop (`add_reader`, non-blocking): ``+PORT PEER``
and ``-PORT`` lines keep the map from the local port of each joined connection to grpc to the
client's address.  `client_peer` answers from the map; on a miss it first reads what the
process has written, since the process writes a connection's line before forwarding its
first byte: a call grpc has seen always finds its client.  Stop closes the process's stdin and
waits for it to close every connection and exit (killed after STOP_TIMEOUT_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

from engine.proxy.join_process import FIRST_BYTE_TIMEOUT_S, LOOPBACK

log = logging.getLogger("engine.proxy")

#: Seconds the join process may take to start, and to stop.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
#: Seconds between attempts to start a dead join process again.
RESTART_DELAY_S = 1.0
_ROOT = str(Path(__file__).resolve().parents[2])


class JoinProcess:
    """grpcServerPort of the permissive mode, joined to grpc's loopback ports."""

    def __init__(self, host: str, port: int, *, plaintext_port: int, tls_port: int,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S,
                 listener: socket.socket | None = None) -> None:
        """Bind the port (or take `listener`, bound and listening: a proxy worker's, shared
        with the other workers' joins, workers.py).

        Raises:
            OSError: the port cannot be bound.
        """
        #: The listening socket is a proxy worker's, shared with the other workers' joins.
        self.shared = listener is not None
        if listener is None:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            listener = socket.create_server((host, port), family=family, backlog=1024)
        self.listener = listener
        self.port: int = self.listener.getsockname()[1]
        self.plaintext_port = plaintext_port
        self.tls_port = tls_port
        self.first_byte_timeout = first_byte_timeout
        self.process: subprocess.Popen[bytes] | None = None
        #: The local port of a joined connection to grpc -> the client (grpc peer syntax).
        self.peers: dict[int, str] = {}
        self._pending = b""
        self._ready: asyncio.Future[None] | None = None
        self._out = -1
        self._stopping = False
        self._restart: asyncio.Task[None] | None = None
        #: How many times a process that died unasked was started again.
        self.restarts = 0

    async def start(self) -> None:
        """Start the process and wait until it accepts.

        Raises:
            OSError: the process did not start.
        """
        try:
            await self._spawn()
        except OSError:
            await self.stop()
            raise

    async def _spawn(self) -> None:
        """Start a process on the listening socket and wait for its ``ready``.

        Raises:
            OSError: it did not start (the failed process is ended).
        """
        fd = self.listener.fileno()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.proxy.join_process", "--listen-fd", str(fd),
             "--plaintext-port", str(self.plaintext_port), "--tls-port", str(self.tls_port),
             "--first-byte-timeout", str(self.first_byte_timeout),
             *(["--shared"] if self.shared else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(fd,), env=env)
        self._pending = b""
        assert self.process.stdout is not None
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._out, False)
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        loop.add_reader(self._out, self._drain)
        try:
            await asyncio.wait_for(self._ready, START_TIMEOUT_S)
        except (TimeoutError, OSError) as exc:
            await self._end_process()
            raise OSError(f"the gRPC port's join process did not start: {exc}") from None

    def _drain(self) -> None:
        """Read what the process wrote (the event loop's reader, and `client_peer`)."""
        try:
            data = os.read(self._out, 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._ended()
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            text = line.decode()
            if text.startswith("+"):
                port, _, peer = text[1:].partition(" ")
                self.peers[int(port)] = peer
            elif text.startswith("-"):
                self.peers.pop(int(text[1:]), None)
            elif text == "ready" and self._ready is not None and not self._ready.done():
                self._ready.set_result(None)

    def _ended(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._out)
        self._out = -1
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(OSError("it ended"))
        elif not self._stopping and self._restart is None:
            self._restart = asyncio.get_running_loop().create_task(self._start_again())

    async def _start_again(self) -> None:
        code = self.process.poll() if self.process is not None else None
        await self._end_process()
        log.error("the gRPC port's join process ended (exit code %s): starting it again",
                  code)
        try:
            while not self._stopping:
                try:
                    await self._spawn()
                except OSError as exc:
                    log.error("the gRPC port's join process did not start again (%s): "
                              "retrying in %.0f s", exc, RESTART_DELAY_S)
                    await asyncio.sleep(RESTART_DELAY_S)
                    continue
                self.restarts += 1
                log.info("the gRPC port's join process runs again")
                return
        finally:
            self._restart = None

    def client_peer(self, peer: str) -> str:
        """grpc's peer text of a call, the join's loopback connection replaced by the
        client's own address."""
        prefix, _, port = peer.rpartition(":")
        if prefix != f"ipv4:{LOOPBACK}" or not port.isdigit():
            return peer
        found = self.peers.get(int(port))
        if found is None and self._out >= 0:
            self._drain()
            found = self.peers.get(int(port))
        return found or peer

    async def stop(self) -> None:
        """Close every joined connection and end the process."""
        self._stopping = True
        if self._restart is not None:
            self._restart.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._restart
        self.listener.close()
        await self._end_process()

    async def _end_process(self) -> None:
        """End the current process (closing its stdin asks it to close its connections
        and exit; killed after STOP_TIMEOUT_S) and forget its connections."""
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            await asyncio.to_thread(process.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("the gRPC port's join process did not stop in %.0f s: killed",
                        STOP_TIMEOUT_S)
            process.kill()
            await asyncio.to_thread(process.wait)
        if self._out >= 0:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._out)
            self._out = -1
        if process.stdout is not None:
            process.stdout.close()
        self.peers.clear()
        self.process = None
