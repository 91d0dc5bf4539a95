"""TLS of the gRPC port: 5.3's server modes and the key and certificate the proxy serves.

How this works: the mode is 5.3's `tls.server.mode` (`config.TlsMode`: disabled, plaintext
only; permissive, both on the one port; enforcing, TLS only), `tlsServerMode` in
rmq-proxy.json; server.py serves it (permissive through join_process.py).  `load_material` gives
the key pair to serve: the files of `tlsKeyPath` / `tlsCertPath` when they are set (checked
with the `ssl` module at start, so a missing file, an unreadable one or a key that does not
match its certificate stops the start naming the file), else, with `tlsTestModeEnable` (the
default, as 5.3), a self-signed certificate made at start by the `openssl` command (an EC
P-256 key, CN=localhost, the proxy's host names and addresses as subject alternative names),
kept in memory only.

Errors::

    ValueError
      └── ProxyTlsError    no usable key pair (file missing, unreadable, mismatched; no openssl)
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

import grpc

from engine.proxy.config import ProxyConfig

#: Days the self-signed test certificate is valid.
TEST_CERT_DAYS = 3650


class ProxyTlsError(ValueError):
    """The proxy has no usable TLS key pair; the message names the file or the key."""


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """A PEM private key and certificate chain to serve, and where they came from."""

    key: bytes = field(repr=False)
    certificate: bytes
    #: "self-signed (tlsTestModeEnable)" or the certificate file's path.
    source: str

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.certificate)])

    def ssl_context(self) -> ssl.SSLContext:
        """A server context of the pair with ALPN h2 (our HTTP/2 front's TLS).  `ssl` reads a
        key pair from files only: it goes through two anonymous memory files, never disk."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["h2"])
        key_fd, cert_fd = os.memfd_create("tls-key"), os.memfd_create("tls-cert")
        try:
            os.write(key_fd, self.key)
            os.write(cert_fd, self.certificate)
            context.load_cert_chain(f"/proc/self/fd/{cert_fd}", f"/proc/self/fd/{key_fd}")
        finally:
            os.close(key_fd)
            os.close(cert_fd)
        return context


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ProxyTlsError(f"cannot read {key} {path}: {exc.strerror or exc}") from None


def read_material(key_path: str, cert_path: str) -> TlsMaterial:
    """The key pair of `tlsKeyPath` and `tlsCertPath`, checked to be PEM and to match.

    Raises:
        ProxyTlsError: a file is missing or unreadable, or they are not a key pair.
    """
    key, cert = _read("tlsKeyPath", key_path), _read("tlsCertPath", cert_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path)
    except (ssl.SSLError, OSError) as exc:
        raise ProxyTlsError(f"tlsCertPath {cert_path} and tlsKeyPath {key_path} are not a PEM "
                            f"certificate and its private key: {exc}") from None
    return TlsMaterial(key, cert, cert_path)


def _alt_names(hosts: Iterable[str]) -> str:
    names: list[str] = []
    for host in ("localhost", "127.0.0.1", *hosts):
        host = host.strip("[]")
        if not host or host in ("0.0.0.0", "::"):
            continue
        try:
            ipaddress.ip_address(host)
            name = f"IP:{host}"
        except ValueError:
            name = f"DNS:{host}"
        if name not in names:
            names.append(name)
    return ",".join(names)


def self_signed(hosts: Iterable[str] = ()) -> TlsMaterial:
    """A new self-signed certificate (CN=localhost) naming `hosts` too, made with `openssl`.

    Raises:
        ProxyTlsError: the openssl command is missing or fails.
    """
    tool = shutil.which("openssl")
    if tool is None:
        raise ProxyTlsError("tlsTestModeEnable makes a self-signed certificate with the "
                            "openssl command, which is not installed: install openssl, or set "
                            "tlsKeyPath and tlsCertPath, or tlsServerMode=disabled")
    with tempfile.TemporaryDirectory(prefix="rmq-proxy-tls-") as tmp:
        key_path, cert_path = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
        command = [tool, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key_path, "-out",
                   cert_path, "-days", str(TEST_CERT_DAYS), "-subj", "/CN=localhost",
                   "-addext", f"subjectAltName={_alt_names(hosts)}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ProxyTlsError(f"openssl could not make the self-signed certificate of "
                                f"tlsTestModeEnable: {done.stderr.strip()}")
        material = read_material(key_path, cert_path)
    return TlsMaterial(material.key, material.certificate, "self-signed (tlsTestModeEnable)")


async def load_material(config: ProxyConfig, hosts: Iterable[str] = ()) -> TlsMaterial:
    """What the proxy serves TLS with: tlsKeyPath + tlsCertPath when set, else (with
    tlsTestModeEnable) a self-signed certificate naming `hosts`.

    Raises:
        ProxyTlsError: a file is missing, unreadable or mismatched, only one of the two
            files is set, or neither is set and tlsTestModeEnable is off.
    """
    key_path, cert_path = config.tls_key_path, config.tls_cert_path
    if key_path and cert_path:
        return await asyncio.to_thread(read_material, key_path, cert_path)
    if key_path or cert_path:
        missing = "tlsCertPath" if key_path else "tlsKeyPath"
        raise ProxyTlsError(f"{missing} is not set: tlsKeyPath and tlsCertPath go together")
    if not config.tls_test_mode_enable:
        raise ProxyTlsError(f"tlsServerMode={config.tls_server_mode} with "
                            "tlsTestModeEnable=false needs tlsKeyPath and tlsCertPath (PEM "
                            "files), or tlsServerMode=disabled")
    return await asyncio.to_thread(self_signed, list(hosts))
