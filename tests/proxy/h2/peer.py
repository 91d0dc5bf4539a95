"""A test client's view of a `ServerConnection`: frames in (built with tests.proxy.h2frames),
the server's answer parsed back into frames, header blocks decoded with an HPACK decoder of
its own."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from hpack import Decoder

from engine.proxy.h2.connection import ServerConnection
from engine.proxy.h2.events import Event
from engine.proxy.h2.frames import CONTINUATION, END_HEADERS, HEADERS
from tests.proxy.h2frames import frame, start


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int
    flags: int
    stream: int
    payload: bytes


def read_frames(data: bytes) -> list[Frame]:
    """Whole frames of `data` (it must hold no partial frame)."""
    frames = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 3], "big")
        kind, flags = data[pos + 3], data[pos + 4]
        stream = int.from_bytes(data[pos + 5:pos + 9], "big") & 0x7FFF_FFFF
        frames.append(Frame(kind, flags, stream, data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    assert pos == len(data), "a partial frame"
    return frames


def word(frame_: Frame, at: int = 0) -> int:
    return int(struct.unpack_from(">I", frame_.payload, at)[0])


@dataclass
class Peer:
    """A connection already past both prefaces (our SETTINGS sent and ACKed, theirs read)."""

    conn: ServerConnection
    decoder: Decoder = field(default_factory=Decoder)

    @classmethod
    def started(cls, conn: ServerConnection | None = None, settings: bytes = b"") -> Peer:
        peer = cls(conn or ServerConnection())
        peer.conn.initiate()
        peer.conn.receive(start()[:-9] + frame(0x4, 0, 0, settings) + frame(0x4, 0x1, 0))
        peer.conn.data_to_send()
        return peer

    def send(self, data: bytes) -> list[Event]:
        return self.conn.receive(data)

    def frames(self) -> list[Frame]:
        return read_frames(self.conn.data_to_send())

    def headers(self, frames: list[Frame]) -> list[tuple[int, list[tuple[str, str]], bool]]:
        """Each header block in `frames` (HEADERS + CONTINUATIONs): stream, fields,
        END_STREAM."""
        blocks = []
        parts: list[bytes] = []
        for f in frames:
            if f.kind == HEADERS:
                parts, stream, end = [f.payload], f.stream, bool(f.flags & 0x1)
            elif f.kind == CONTINUATION:
                parts.append(f.payload)
            else:
                continue
            if f.flags & END_HEADERS:
                fields = [(str(n), str(v)) for n, v in self.decoder.decode(b"".join(parts))]
                blocks.append((stream, fields, end))
        return blocks
