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


_FORBIDDEN_IN_VALUES: Final = ("\x00", "\r", "\n")
_EDGE_WHITESPACE: Final = (" ", "\t")


def _bad_value(value: str) -> bool:
    """A value with NUL, CR or LF, or white space at either end (section 8.2.1)."""
    return bool(value) and (any(c in value for c in _FORBIDDEN_IN_VALUES)
                            or value.startswith(_EDGE_WHITESPACE)
                            or value.endswith(_EDGE_WHITESPACE))


def _bad_regular(name: str, value: str) -> bool:
    return (not name or name != name.lower() or name in CONNECTION_SPECIFIC
            or (name == "te" and value != "trailers") or _bad_value(value))


def request_is_malformed(headers: Headers) -> bool:
    """True unless the list is a valid request header section: pseudo-header fields first,
    each of :method, :scheme, :path once (:path not empty; a CONNECT has :authority and
    neither :scheme nor :path), no unknown pseudo-header, regular names lowercase and not
    connection-specific, no value with NUL, CR, LF or white space at either end."""
    seen: set[str] = set()
    method = ""
    regular = False
    for name, value in headers:
        if name[:1] == ":":
            if regular or name in seen or name not in _REQUEST_PSEUDO:
                return True
            seen.add(name)
            if _bad_value(value):
                return True
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
