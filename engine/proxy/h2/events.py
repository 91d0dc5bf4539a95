"""What a `ServerConnection` reports to the application, and the error it raises at it.

Error tree (peer input never raises; only a caller's misuse does):

    H2Error            -- a call that cannot be right whatever the peer did
                          (sending on a stream that was never opened)
    ConnectionFailure  -- internal: a connection error found while parsing; it never leaves
                          `ServerConnection.receive`, which turns it into GOAWAY
"""

from __future__ import annotations

from dataclasses import dataclass

#: A header list as decoded, in order: lowercase names, values as sent.
Headers = list[tuple[str, str]]


class H2Error(Exception):
    """The application called the connection in a way that is a bug on its side."""


class ConnectionFailure(Exception):
    """Internal: the peer broke the protocol so that the connection must end with `code`
    (an RFC 9113 error code); the message is GOAWAY's debug data."""

    def __init__(self, code: int, debug: str) -> None:
        super().__init__(debug)
        self.code = code


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A client opened a stream with a well-formed request header list."""

    stream_id: int
    headers: Headers
    end_stream: bool


@dataclass(frozen=True, slots=True)
class DataReceived:
    """Request body bytes (padding removed), or b"" with end_stream for a client's
    trailing HEADERS (their fields are not reported)."""

    stream_id: int
    data: bytes
    end_stream: bool


@dataclass(frozen=True, slots=True)
class StreamReset:
    """A stream the application knows is gone: the peer's RST_STREAM, or our RST_STREAM
    after a stream error. Stop the call; sends on it are ignored from now on."""

    stream_id: int
    error_code: int


@dataclass(frozen=True, slots=True)
class ConnectionEnded:
    """The peer's GOAWAY (by_peer, streams up to last_stream_id may still finish), or our
    connection error: GOAWAY is queued, further input is ignored; flush and close."""

    error_code: int
    last_stream_id: int
    by_peer: bool


@dataclass(frozen=True, slots=True)
class PingAcknowledged:
    """The peer's ACK of a PING we sent (`ServerConnection.ping`), with its 8 bytes."""

    opaque: bytes


Event = RequestReceived | DataReceived | StreamReset | ConnectionEnded | PingAcknowledged
