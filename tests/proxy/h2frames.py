"""Hand-built HTTP/2 frames (RFC 9113) for connections that break the protocol on purpose,
and a reader of what a server answers to them (no HTTP/2 library needed)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8, 0x9)
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
#: RFC 9113 error codes.
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x3, 0xB
#: :method POST, :scheme http, :path / (HPACK static table entries 3, 6, 4).
REQUEST_HEADERS = b"\x83\x86\x84"


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream & 0x7FFF_FFFF) + payload


def window_update(stream: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", increment))


def start() -> bytes:
    """The client preface and an empty SETTINGS."""
    return PREFACE + frame(SETTINGS, 0, 0)


@dataclass(frozen=True, slots=True)
class Answer:
    """What the server sent back: frame types in order, the GOAWAY's error code if any,
    and whether it closed the connection (False: still open when the reading stopped)."""

    kinds: tuple[int, ...]
    goaway_error: int | None
    closed: bool


async def answer_to(host: str, port: int, sent: bytes, *, wait_s: float = 5.0) -> Answer:
    """Send `sent` (after the preface) and read frames until the server closes, or until
    `wait_s` passes without one."""
    reader, writer = await asyncio.open_connection(host, port)
    kinds: list[int] = []
    goaway: int | None = None
    closed = False
    try:
        writer.write(start() + sent)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(9), wait_s)
                payload = await asyncio.wait_for(
                    reader.readexactly(int.from_bytes(head[:3], "big")), wait_s)
            except (asyncio.IncompleteReadError, ConnectionError):
                closed = True
                break
            except TimeoutError:
                break
            kinds.append(head[3])
            if head[3] == GOAWAY:
                goaway = int.from_bytes(payload[4:8], "big")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return Answer(tuple(kinds), goaway, closed)


def continuation_flood(count: int = 10_000) -> bytes:
    """HEADERS on stream 1 without END_HEADERS, then `count` CONTINUATIONs that never end
    it (each three literal headers of 34 bytes, never indexed)."""
    literal = (b"\x10\x01a\x1e" + b"x" * 30) * 3  # "a: xxx...", never indexed, 3 times
    return frame(HEADERS, 0, 1, REQUEST_HEADERS) + b"".join(
        frame(CONTINUATION, 0, 1, literal) for _ in range(count))


#: A PING after the offending frames: answered (an ACK) while the connection still serves.
PING_AFTER = frame(PING, 0, 0, b"h2-probe")

#: The offending frames of each case, a PING after them.
CASES: dict[str, bytes] = {
    "CONTINUATION flood, then a PING inside the header block":
        continuation_flood() + PING_AFTER,
    "CONTINUATION flood, ended": continuation_flood()
        + frame(CONTINUATION, END_HEADERS, 1) + PING_AFTER,
    "HEADERS on stream 2": frame(HEADERS, END_HEADERS | END_STREAM, 2, REQUEST_HEADERS)
        + PING_AFTER,
    "connection window overflow": window_update(0, 0x7FFF_FFFF) + PING_AFTER,
    "WINDOW_UPDATE of 0": window_update(0, 0) + PING_AFTER,
}
