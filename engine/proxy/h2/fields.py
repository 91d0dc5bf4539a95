"""Which decoded header lists HTTP/2 accepts as a request or as trailers (RFC 9113 section
8.2 and 8.3): a list that breaks these rules makes the request malformed, a stream error of
type PROTOCOL_ERROR."""

from __future__ import annotations

from typing import Final

from engine.proxy.h2.events import Headers

#: Connection-specific fields, forbidden in HTTP/2 (section 8.2.2); "te" is checked apart.
CONNECTION_SPECIFIC: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"})
_REQUEST_PSEUDO: Final = frozenset({":method", ":scheme", ":path", ":authority"})


def _bad_regular(name: str, value: str) -> bool:
    return (not name or name != name.lower() or name in CONNECTION_SPECIFIC
            or (name == "te" and value != "trailers"))


def request_is_malformed(headers: Headers) -> bool:
    """True unless the list is a valid request header section: pseudo-header fields first,
    each of :method, :scheme, :path once (:path not empty; a CONNECT has :authority and
    neither :scheme nor :path), no unknown pseudo-header, regular names lowercase and not
    connection-specific."""
    seen: set[str] = set()
    method = ""
    regular = False
    for name, value in headers:
        if name[:1] == ":":
            if regular or name in seen or name not in _REQUEST_PSEUDO:
                return True
            seen.add(name)
            if name == ":method":
                method = value
            elif name == ":path" and not value:
                return True
        else:
            regular = True
            if _bad_regular(name, value):
                return True
    if method == "CONNECT":
        return ":authority" not in seen or ":scheme" in seen or ":path" in seen
    return not {":method", ":scheme", ":path"} <= seen


def trailers_are_malformed(headers: Headers) -> bool:
    """True if a trailer section carries a pseudo-header or a bad regular field."""
    return any(name[:1] == ":" or _bad_regular(name, value) for name, value in headers)
