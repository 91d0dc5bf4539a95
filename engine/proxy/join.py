"""TLS and plaintext gRPC clients on one port: each connection joined to grpc's port for it.

How this works: grpcio's server cannot serve TLS and plaintext on one port, and cannot adopt
an accepted socket, so in 5.3's permissive mode it listens on two loopback ports of its own
(one plaintext, one TLS) and `PortJoin` owns grpcServerPort.  An acceptor thread accepts;
each connection gets a thread that peeks at its first byte (waiting at most
`first_byte_timeout` seconds; a silent client is closed), 0x16 (a TLS handshake record, what
5.3's `SslHandler.isEncrypted` looks for) choosing the TLS port and anything else (the HTTP/2
preface) the plaintext one, connects there, and then moves the client's bytes to grpc while a
second thread moves grpc's bytes back.  The bytes move with `os.splice` through a pipe per
direction: the kernel copies socket to pipe to socket, the thread holds the GIL only between
two syscalls, and the event loop's thread (which runs grpc.aio's Python layer, the proxy and
the broker, and bounds the rate) does no work for the join at all.  An end of stream is passed
on as a half close (shutdown SHUT_WR), so closing either side closes the other; an error on
either side shuts both down; the last thread of a connection closes its sockets and pipes.

grpc sees the join's loopback connection as the peer: `client_peer` maps it back (by the
internal connection's local port, recorded before the first byte is forwarded, so before grpc
can see a call on it) to the client's own address, in grpc's peer syntax.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading

log = logging.getLogger("engine.proxy")

#: The first byte of a TLS connection: a handshake record (ContentType 22).
TLS_HANDSHAKE = 0x16
#: Seconds a new connection may stay silent before it is closed.
FIRST_BYTE_TIMEOUT_S = 10.0
#: Bytes one splice moves at most (a pipe's default capacity).
CHUNK = 64 * 1024
LOOPBACK = "127.0.0.1"


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
    read_end, write_end = os.pipe()
    try:
        src_fd, dst_fd = src.fileno(), dst.fileno()
        while True:
            moved = os.splice(src_fd, write_end, CHUNK)
            if moved == 0:
                _shutdown(dst, socket.SHUT_WR)
                return
            while moved:
                moved -= os.splice(read_end, dst_fd, moved)
    except OSError:
        _shutdown(src, socket.SHUT_RDWR)
        _shutdown(dst, socket.SHUT_RDWR)
    finally:
        os.close(read_end)
        os.close(write_end)


class PortJoin:
    """grpcServerPort of the permissive mode; see the module docstring."""

    def __init__(self, host: str, port: int, *, plaintext_port: int, tls_port: int,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S) -> None:
        self.host = host
        self.plaintext_port = plaintext_port
        self.tls_port = tls_port
        self.first_byte_timeout = first_byte_timeout
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        #: Raises OSError when the port cannot be bound.
        self.listener = socket.create_server((host, port), family=family, backlog=1024)
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closing = False
        #: Every connection's sockets, until its last thread closes them.
        self._sockets: dict[socket.socket, socket.socket | None] = {}
        self._threads: set[threading.Thread] = set()
        #: The internal connection's local port -> the client's address (grpc peer syntax).
        self._peers: dict[int, str] = {}
        self._acceptor: threading.Thread | None = None

    @property
    def connections(self) -> int:
        """Client connections open through the join."""
        return len(self._sockets)

    def start(self) -> None:
        self._acceptor = threading.Thread(target=self._accept, name=f"proxy-join-{self.port}",
                                          daemon=True)
        self._acceptor.start()

    def client_peer(self, peer: str) -> str:
        """grpc's peer text of a call, with the join's loopback connection replaced by the
        client's own address."""
        prefix, _, port = peer.rpartition(":")
        if prefix != f"ipv4:{LOOPBACK}" or not port.isdigit():
            return peer
        return self._peers.get(int(port), peer)

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
                self._peers[local_port] = client_peer
                self._threads.add(back)
            back.start()
            _pump(client, upstream)
            back.join()
        finally:
            with self._lock:
                self._sockets.pop(client, None)
                self._peers.pop(local_port, None)
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
