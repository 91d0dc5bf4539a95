"""TLS and plaintext gRPC clients on one port: each connection joined to grpc's port for it.

How this works: grpcio's server cannot serve TLS and plaintext on one port, and cannot adopt
an accepted socket, so in 5.3's permissive mode it listens on two loopback ports of its own
(one plaintext, one TLS) and `PortJoin` owns grpcServerPort.  An acceptor thread accepts;
each connection gets a thread that peeks at its first byte (waiting at most
`first_byte_timeout` seconds; a silent client is closed), 0x16 (a TLS handshake record, what
5.3's `SslHandler.isEncrypted` looks for) choosing the TLS port and anything else (the HTTP/2
preface) the plaintext one, connects there, and then moves the client's bytes to grpc while a
second thread moves grpc's bytes back.  The bytes move with `os.splice` through a pipe per
direction (the kernel copies socket to pipe to socket; the thread holds the GIL only between
two syscalls; where there is no splice, not on Linux, through a buffer).  An end of stream is
passed on as a half close (shutdown SHUT_WR), so closing either side closes the other; an
error on either side shuts both down; the connection's first thread closes its sockets once
both directions have ended.

`PortJoin` runs in a process of its own (`python -m engine.proxy.join_process`, started by
join_supervisor.py): in the proxy's process its threads would take the GIL twice per chunk from the
event loop's thread, which runs grpc.aio's Python layer, the proxy and the broker and bounds
the rate (measured: a third more of that thread's CPU per one-message call).  The process
gets the bound listening socket as an inherited fd and reports on stdout, one line each:
``ready``, ``+PORT PEER`` when a connection is joined (PORT: the local port of its
connection to grpc, PEER: the client's address in grpc's peer syntax; written before the
first byte is forwarded, so before grpc can see a call on it) and ``-PORT`` when it is
closed.  It stops, closing every connection, when its stdin ends (the proxy stopping, or
dying).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

log = logging.getLogger("engine.proxy.join_process")

#: The first byte of a TLS connection: a handshake record (ContentType 22).
TLS_HANDSHAKE = 0x16
#: Seconds a new connection may stay silent before it is closed.
FIRST_BYTE_TIMEOUT_S = 10.0
#: Bytes one splice moves at most (a pipe's default capacity).
CHUNK = 64 * 1024
LOOPBACK = "127.0.0.1"
#: prctl(2)'s option: the signal this process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def peer_text(addr: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """A socket address in grpc's peer syntax (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    host, port = addr[0], addr[1]
    if ":" in host:
        return f"ipv6:[{host}]:{port}"
    return f"ipv4:{host}:{port}"


def _shutdown(sock: socket.socket, how: int) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(how)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Move `src`'s bytes to `dst` until `src` ends (then half-close `dst`) or fails (then
    shut both down)."""
    try:
        if hasattr(os, "splice"):
            _splice(src.fileno(), dst.fileno())
        else:  # not Linux: through a buffer
            _copy(src, dst)
        _shutdown(dst, socket.SHUT_WR)
    except OSError:
        _shutdown(src, socket.SHUT_RDWR)
        _shutdown(dst, socket.SHUT_RDWR)


def _splice(src: int, dst: int) -> None:
    read_end, write_end = os.pipe()
    try:
        while moved := os.splice(src, write_end, CHUNK):
            while moved:
                moved -= os.splice(read_end, dst, moved)
    finally:
        os.close(read_end)
        os.close(write_end)


def _copy(src: socket.socket, dst: socket.socket) -> None:
    buffer = memoryview(bytearray(CHUNK))
    while received := src.recv_into(buffer):
        dst.sendall(buffer[:received])


class PortJoin:
    """grpcServerPort of the permissive mode; see the module docstring."""

    def __init__(self, listener: socket.socket, *, plaintext_port: int, tls_port: int,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S,
                 report: Callable[[str], None] | None = None, shared: bool = False) -> None:
        self.listener = listener
        #: The listening socket is shared with other processes' joins (proxy workers), which
        #: accept from the same queue: the kernel wakes one blocked accept() per connection.
        self.shared = shared
        self.port: int = listener.getsockname()[1]
        self.plaintext_port = plaintext_port
        self.tls_port = tls_port
        self.first_byte_timeout = first_byte_timeout
        #: Told ``+PORT PEER`` and ``-PORT`` (the module docstring).
        self.report = report or (lambda line: None)
        self._lock = threading.Lock()
        self._closing = False
        #: Every connection's sockets, until its last thread closes them.
        self._sockets: dict[socket.socket, socket.socket | None] = {}
        self._threads: set[threading.Thread] = set()
        self._acceptor: threading.Thread | None = None

    @property
    def connections(self) -> int:
        """Client connections open through the join."""
        return len(self._sockets)

    def start(self) -> None:
        self._acceptor = threading.Thread(target=self._accept, name=f"proxy-join-{self.port}",
                                          daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                client, addr = self.listener.accept()
            except OSError:
                if self._closing:
                    return
                log.exception("gRPC port %d: accept failed", self.port)
                continue
            thread = threading.Thread(target=self._serve, args=(client, peer_text(addr)),
                                      name=f"proxy-join-{self.port}-in", daemon=True)
            with self._lock:
                if self._closing:
                    client.close()
                    return
                self._sockets[client] = None
                self._threads.add(thread)
            thread.start()

    def _serve(self, client: socket.socket, client_peer: str) -> None:
        upstream: socket.socket | None = None
        back: threading.Thread | None = None
        local_port = 0
        try:
            client.settimeout(self.first_byte_timeout)
            try:
                first = client.recv(1, socket.MSG_PEEK)
            except OSError:  # silent past the timeout, or reset
                return
            if not first:
                return
            client.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            port = self.tls_port if first[0] == TLS_HANDSHAKE else self.plaintext_port
            try:
                upstream = socket.create_connection((LOOPBACK, port))
            except OSError as exc:
                log.warning("gRPC port %d: cannot reach grpc's port %d for %s: %s", self.port,
                            port, client_peer, exc)
                return
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            local_port = upstream.getsockname()[1]
            back = threading.Thread(target=_pump, args=(upstream, client),
                                    name=f"proxy-join-{self.port}-out", daemon=True)
            with self._lock:
                if self._closing:
                    return
                self._sockets[client] = upstream
                self._threads.add(back)
            self.report(f"+{local_port} {client_peer}")
            back.start()
            _pump(client, upstream)
            back.join()
        finally:
            if local_port:
                self.report(f"-{local_port}")
            with self._lock:
                self._sockets.pop(client, None)
                self._threads.discard(threading.current_thread())
                if back is not None:
                    self._threads.discard(back)
            client.close()
            if upstream is not None:
                upstream.close()

    def close_listener(self) -> None:
        """Accept no more connections (those open keep going)."""
        with self._lock:
            self._closing = True
        if self.shared:
            # Shut down, the socket would stop accepting in every process that shares it: the
            # acceptor stays blocked in accept() (a daemon thread, ended with the process),
            # and a connection it takes from now on is closed.
            return
        _shutdown(self.listener, socket.SHUT_RDWR)  # wakes the acceptor's accept()
        if self._acceptor is not None:
            self._acceptor.join()
        self.listener.close()

    def stop(self) -> None:
        """Close the listener and every connection; return when all threads have ended.
        Blocks (briefly): run it in a thread from the event loop."""
        self.close_listener()
        with self._lock:
            sockets = [s for pair in self._sockets.items() for s in pair if s is not None]
            threads = list(self._threads)
        for sock in sockets:
            _shutdown(sock, socket.SHUT_RDWR)
        for thread in threads:
            if thread.is_alive():
                thread.join()


def _die_with_parent() -> None:
    """Be killed when the proxy's process dies (Linux: prctl PR_SET_PDEATHSIG), not only once
    stdin ends: on a shared listening socket (proxy workers) a join whose proxy is gone must
    not accept one more connection it can only close."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: stdin's end still stops the process
        return
    if os.getppid() == 1:  # the proxy died before the prctl
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """The join's process: `PortJoin` on the inherited listening socket until stdin ends."""
    parser = argparse.ArgumentParser(prog="python -m engine.proxy.join_process")
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--plaintext-port", type=int, required=True)
    parser.add_argument("--tls-port", type=int, required=True)
    parser.add_argument("--first-byte-timeout", type=float, default=FIRST_BYTE_TIMEOUT_S)
    parser.add_argument("--shared", action="store_true",
                        help="the listening socket is shared with other processes")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C: the proxy stops us
    _die_with_parent()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s - %(message)s")
    out_lock = threading.Lock()

    def report(line: str) -> None:
        with out_lock, contextlib.suppress(OSError):  # the proxy gone: stdin ends too
            os.write(1, f"{line}\n".encode())

    join = PortJoin(socket.socket(fileno=args.listen_fd), plaintext_port=args.plaintext_port,
                    tls_port=args.tls_port, first_byte_timeout=args.first_byte_timeout,
                    report=report, shared=args.shared)
    join.start()
    report("ready")
    while os.read(0, 4096):
        pass
    join.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
