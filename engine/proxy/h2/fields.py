"""Which decoded header lists HTTP/2 accepts as a request or as trailers (RFC 9113 section
8.2 and 8.3): a list that breaks these rules makes the request malformed, a stream error of
type PROTOCOL_ERROR.

The checks run once per distinct header block (the decoder caches its verdict), over joined
strings rather than field by field, since a RocketMQ client's requests carry 15 fields.
"""

from __future__ import annotations

import re
from typing import Final

from engine.proxy.h2.events import Headers

#: Connection-specific fields, forbidden in HTTP/2 (section 8.2.2); "te" is checked apart.
CONNECTION_SPECIFIC: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"})
_REQUEST_PSEUDO: Final = frozenset({":method", ":scheme", ":path", ":authority"})
#: A character no field name may hold (section 8.2.1: controls, space, uppercase, 0x7F and
#: above; and ':' , which only opens a pseudo-header's name).
_BAD_NAME_CHAR: Final = re.compile("[^\x21-\x39\x3b-\x40\x5b-\x7e]")
#: White space at either end of a value, values joined by LF (section 8.2.1).
_EDGE_WHITESPACE: Final = re.compile(r"^[ \t]|[ \t]$", re.MULTILINE)


def _bad_values(values: list[str]) -> bool:
    """A value with NUL, CR or LF, or white space at either end (section 8.2.1)."""
    joined = "\n".join(values)
    return ("\r" in joined or "\x00" in joined or joined.count("\n") != len(values) - 1
            or _EDGE_WHITESPACE.search(joined) is not None)


def _bad_fields(fields: Headers) -> bool:
    """Regular fields: a bad name, a connection-specific field, te other than trailers."""
    names = [name for name, _ in fields]
    if "" in names or _BAD_NAME_CHAR.search("".join(names)):
        return True
    if not CONNECTION_SPECIFIC.isdisjoint(names):
        return True
    return "te" in names and any(name == "te" and value != "trailers" for name, value in fields)


def request_is_malformed(headers: Headers) -> bool:
    """True unless the list is a valid request header section: pseudo-header fields first,
    each of :method, :scheme, :path once (:path not empty; a CONNECT has :authority and
    neither :scheme nor :path), no unknown pseudo-header, regular names lowercase tokens and
    not connection-specific, no value with NUL, CR, LF or white space at either end."""
    pseudo: dict[str, str] = {}
    for name, value in headers:
        if name[:1] != ":":
            break
        if name in pseudo or name not in _REQUEST_PSEUDO:
            return True
        pseudo[name] = value
    if _bad_values([value for _, value in headers]):
        return True
    if len(pseudo) < len(headers) and _bad_fields(headers[len(pseudo):]):
        return True
    if pseudo.get(":method") == "CONNECT":
        return ":authority" not in pseudo or ":scheme" in pseudo or ":path" in pseudo
    return ":scheme" not in pseudo or not pseudo.get(":path") or ":method" not in pseudo


def content_length(headers: Headers) -> int | None:
    """The `content-length` a request declares (section 8.1.1), None without one; -1 when
    it is no length: not digits, or several different values (Netty allows repeats of one
    value, also comma-separated)."""
    found: set[str] = set()
    for name, value in headers:
        if name == "content-length":
            found.update(part.strip() for part in value.split(","))
    if not found:
        return None
    if len(found) > 1:
        return -1
    (value,) = found
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else -1


def trailers_are_malformed(headers: Headers) -> bool:
    """True if a trailer section carries a pseudo-header or a bad field."""
    return bool(headers) and (_bad_values([value for _, value in headers])
                              or _bad_fields(headers))
