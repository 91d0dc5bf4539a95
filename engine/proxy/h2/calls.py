"""One gRPC call over HTTP/2: its headers read, its messages framed, its status written.

How this works: gRPC (PROTOCOL-HTTP2.md) carries each message as a 5-byte prefix (a
compressed flag, a big-endian length) and the message; a call's request headers are
`:path` /service/method, `content-type` application/grpc..., optionally `grpc-timeout` and
`grpc-encoding`, and the caller's metadata; the answer is HEADERS (`:status` 200,
content-type), the messages, and trailing HEADERS with `grpc-status` (and `grpc-message`,
percent-encoded), or one HEADERS with all of them (Trailers-Only) when the call fails before
its first message.  `ServicerContext` is what the service's methods are handed: the subset of
grpc.aio's context they use (peer, invocation_metadata, time_remaining, abort), so the same
methods serve grpcio's front and this one.  Texts of the statuses this layer makes itself are
grpc-java's, as Apache's proxy answers them.
"""

from __future__ import annotations

import base64
import re
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any, NoReturn

import grpc

from engine.proxy.h2.frames import encode_headers

PREFIX = struct.Struct(">BI")
#: The status codes this layer answers with itself.
UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
INTERNAL = grpc.StatusCode.INTERNAL.value[0]
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
DEADLINE_EXCEEDED = grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
#: Metadata the service does not see (grpc-core keeps them out of invocation_metadata too).
RESERVED = frozenset({"te", "content-type", "grpc-timeout", "grpc-encoding",
                      "grpc-accept-encoding"})
_TIMEOUT = re.compile(r"(\d{1,8})([HMSmun])")
_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}

#: The answer's headers and the trailers of a call that ended OK.
HEAD = encode_headers(((":status", "200"), ("content-type", "application/grpc")))
OK_TRAILERS = encode_headers((("grpc-status", "0"),))


class Aborted(Exception):
    """The method ended its call with a status (`ServicerContext.abort`)."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(code, details)
        self.code = code
        self.details = details


class CallError(Exception):
    """The call cannot go on: `code` and `details` are its status; `http_status`, for a
    request that is not gRPC, the HTTP status it is answered with (grpc-java's 405 and 415)."""

    def __init__(self, code: int, details: str, http_status: int = 200) -> None:
        super().__init__(code, details)
        self.code = code
        self.details = details
        self.http_status = http_status


def parse_timeout(text: str) -> float | None:
    """A grpc-timeout value in seconds (None: not one)."""
    match = _TIMEOUT.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) * _UNITS[match.group(2)]


def percent_encode(text: str) -> str:
    """grpc-message's encoding: UTF-8, bytes outside printable ASCII and '%' as %XX."""
    data = text.encode("utf-8")
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in data):
        return text
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in data)


def status_headers(code: int, details: str, *, trailers_only: bool) -> bytes:
    """The trailing HEADERS of a call (or the only HEADERS, Trailers-Only)."""
    fields: list[tuple[str, str]] = []
    if trailers_only:
        fields += [(":status", "200"), ("content-type", "application/grpc")]
    fields.append(("grpc-status", str(code)))
    if details:
        fields.append(("grpc-message", percent_encode(details)))
    return encode_headers(fields)


def http_error_headers(http_status: int, code: int, details: str) -> bytes:
    """The HEADERS of a request that is not gRPC, as grpc-java answers it (the text follows
    as the body)."""
    return encode_headers(((":status", str(http_status)),
                           ("content-type", "text/plain; charset=utf-8"),
                           ("grpc-status", str(code)), ("grpc-message", percent_encode(details))))


def frame_message(data: bytes) -> bytes:
    """One message with its 5-byte prefix (never compressed)."""
    return PREFIX.pack(0, len(data)) + data


class MessageReader:
    """Splits a call's DATA into messages, across DATA frames, decompressing if asked."""

    __slots__ = ("_buffer", "_encoding", "_limit")

    def __init__(self, encoding: str, limit: int) -> None:
        self._buffer = b""
        self._encoding = encoding
        self._limit = limit

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The messages `data` completes.

        Raises:
            CallError: a message larger than the limit, or compressed in a way we cannot read.
        """
        buffer = self._buffer + data if self._buffer else data
        pos, size = 0, len(buffer)
        while size - pos >= 5:
            flag, length = PREFIX.unpack_from(buffer, pos)
            if length > self._limit:
                raise CallError(RESOURCE_EXHAUSTED,
                                f"gRPC message exceeds maximum size {self._limit}: {length}")
            end = pos + 5 + length
            if end > size:
                break
            message = buffer[pos + 5:end]
            pos = end
            yield self._decompress(message) if flag else message
        self._buffer = buffer[pos:]

    @property
    def pending(self) -> bool:
        """Bytes of an unfinished message are held."""
        return bool(self._buffer)

    def _decompress(self, message: bytes) -> bytes:
        if self._encoding in ("gzip", "deflate"):
            wbits = 31 if self._encoding == "gzip" else 15
            try:
                return zlib.decompress(message, wbits)
            except zlib.error as exc:
                raise CallError(INTERNAL,
                                f"Can't decode compressed gRPC message: {exc}") from None
        if self._encoding in ("", "identity"):
            raise CallError(INTERNAL,
                            "Can't decode compressed gRPC message as compression not "
                            "configured")
        raise CallError(UNIMPLEMENTED,
                        f"Can't find decompressor for {self._encoding}")


class ServicerContext:
    """What a method of the service is handed about its call (grpc.aio's names)."""

    __slots__ = ("_deadline", "_metadata", "_peer", "code", "details")

    def __init__(self, metadata: tuple[tuple[str, str | bytes], ...], peer: str,
                 deadline: float | None) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = deadline
        #: The status the method ended the call with (`abort`), None until then.
        self.code: int | None = None
        self.details = ""

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    async def abort(self, code: grpc.StatusCode, details: str = "",
                    trailing_metadata: Any = ()) -> NoReturn:
        self.code, self.details = code.value[0], details
        raise Aborted(self.code, details)


def read_request(headers: list[tuple[str, str]]) -> tuple[
        str, str, float | None, tuple[tuple[str, str | bytes], ...]]:
    """A request's :path, grpc-encoding, timeout (seconds) and metadata.

    Raises:
        CallError: not a gRPC request (no POST, no application/grpc content type).
    """
    path = method = ""
    content_type = encoding = ""
    timeout: float | None = None
    metadata: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name[0] == ":":
            if name == ":path":
                path = value
            elif name == ":method":
                method = value
        elif name in RESERVED:
            if name == "content-type":
                content_type = value
            elif name == "grpc-timeout":
                timeout = parse_timeout(value)
            elif name == "grpc-encoding":
                encoding = value
        elif name.endswith("-bin"):
            try:
                metadata.append((name, base64.b64decode(value + "=" * (-len(value) % 4),
                                                        validate=True)))
            except ValueError:  # binascii.Error
                raise CallError(INTERNAL,
                                f"Invalid base64 in binary header {name}") from None
        else:
            metadata.append((name, value))
    # grpc-java's checks, in its order, with its texts
    if not content_type:
        raise CallError(INTERNAL, "Content-Type is missing from the request", 415)
    if not content_type.startswith("application/grpc"):
        raise CallError(INTERNAL, f"Content-Type '{content_type}' is not supported", 415)
    if method != "POST":
        raise CallError(INTERNAL, f"Method '{method}' is not supported", 405)
    return path, encoding, timeout, tuple(metadata)
