"""Who is calling: the 5.x clients' request headers (x-mq-*) and the peer address, sans-IO.

Every 5.x client sends these headers on each call (5.3 `GrpcConstants`, the clients'
`Signature.metadata`): x-mq-client-id, x-mq-language, x-mq-client-version, x-mq-protocol,
x-mq-namespace, x-mq-request-id, x-mq-date-time and, with credentials, `authorization`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.protocol.codes import LanguageCode
from engine.protocol.version import CURRENT_VERSION, version_ordinal

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
PROTOCOL = "x-mq-protocol"
NAMESPACE = "x-mq-namespace"
REQUEST_ID = "x-mq-request-id"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)
_PEER = re.compile(r"^ipv[46]:(.*)$")


@dataclass(frozen=True, slots=True)
class CallContext:
    """One call's client identity, as its headers state it."""

    client_id: str
    language: str
    client_version: str
    protocol: str
    namespace: str
    date_time: str
    authorization: str
    #: ``host:port`` of the peer ("" when unknown).
    remote_addr: str

    @property
    def language_code(self) -> int:
        """The remoting `language` the broker records (OTHER when not a known name)."""
        name = self.language.upper().replace("-", "_")
        if name == "NODEJS":
            name = "NODE_JS"
        try:
            return LanguageCode[name].value
        except KeyError:
            return LanguageCode.OTHER.value

    @property
    def version_ordinal(self) -> int:
        """The `MQVersion` ordinal of x-mq-client-version ("5.1.2" -> V5_1_2)."""
        text = self.client_version.strip()
        if text.upper().startswith("V") and "_" in text:
            try:
                return version_ordinal(text.upper())
            except ValueError:
                return CURRENT_VERSION
        m = _VERSION.match(text)
        if m is None or m.group(1) not in ("4", "5") or len(m.group(2)) > 1 \
                or len(m.group(3)) > 1:
            return CURRENT_VERSION
        return version_ordinal(f"V{m.group(1)}_{m.group(2)}_{m.group(3)}")


def peer_addr(peer: str) -> str:
    """grpc's peer text (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``) as ``host:port``."""
    m = _PEER.match(peer)
    return m.group(1) if m else ""


def call_context(metadata: Iterable[tuple[str, str | bytes]], peer: str) -> CallContext:
    """The headers of one call (keys are lower case in gRPC) and its peer."""
    headers: dict[str, str] = {}
    for key, value in metadata:
        headers[key] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    get = headers.get
    return CallContext(
        client_id=get(CLIENT_ID, ""), language=get(LANGUAGE, ""),
        client_version=get(CLIENT_VERSION, ""), protocol=get(PROTOCOL, ""),
        namespace=get(NAMESPACE, ""), date_time=get(DATE_TIME, ""),
        authorization=get(AUTHORIZATION, ""), remote_addr=peer_addr(peer))
